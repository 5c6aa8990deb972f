"""Fixtures for the cluster commands (`tfjob submit/get/logs/wait/delete`), end to end:
the real `tfjob` command in a child process, against the real API server, with a
`tfjob operator` subprocess reconciling the test's namespace.

- ``operators``, ``operator``, ``jobs``: the operator's fixtures
  (tests/kubernetes/conftest.py).
- ``cli`` (function): runs `tfjob ARGS --kubeconfig <admin> -n <namespace>`; the
  TFJob and PyTorchJob CRDs are installed (session-scoped, so before any operator
  of the test starts: an operator serves the kinds installed when it starts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.cluster_cli import Cli


@pytest.fixture
def cli(
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    crd_installed: Any,
    pytorchjob_crd_installed: None,
) -> Cli:
    return Cli(kubeconfig, namespace, tmp_path)
