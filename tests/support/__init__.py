"""Test support shared across suites: a real control plane and a stand-in kubelet.

- ``tests.support.controlplane``: ``ControlPlane`` starts a real etcd + kube-apiserver
  (built from Go modules by tools/envtest/build.sh), plus manifest helpers.
- ``tests.support.kubelet``: ``FakeKubelet`` reports pod phases and container states
  through pods/status, since that control plane has no kubelet.
"""
