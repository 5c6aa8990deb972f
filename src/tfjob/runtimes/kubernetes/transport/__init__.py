"""Talking to the API server: requests and errors (client), the kubeconfig and
credentials, the resources' paths, and decoding what comes back."""
