"""What tests and benchmarks share; not part of the shipped package.

- ``testkit.helpers``: a free port, TFJob manifests, waiting (``wait_for``, ``until``).
- ``testkit.builders``: decoded TFJobs and observed pods for the core's tests.
- ``testkit.fake_api``: ``FakeApi``, an in-memory API server behind the methods of
  the operator's client, for the shell's tests that need no etcd.
- ``testkit.controlplane``: ``ControlPlane`` starts a real etcd + kube-apiserver
  (built from Go modules by tools/envtest/build.sh), plus manifest helpers.
- ``testkit.kubelet``: ``FakeKubelet`` reports pod phases and container states
  through pods/status, since that control plane has no kubelet.
"""
