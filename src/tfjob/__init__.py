"""tfjob: run distributed TensorFlow jobs (kubeflow.org/v1 TFJob) locally or on Kubernetes."""

__version__ = "0.1.0"
