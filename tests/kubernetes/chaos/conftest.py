"""Fixtures for the chaos tests (the operator's fixtures come from tests/kubernetes).

- ``proxy`` (function): a ``FaultProxy`` (testkit/fault_proxy.py) in front of the
  session's API server, with no rules yet; stopped after the test.
- ``proxied_operators`` (function): like ``operators``, but each operator reaches the
  API server through ``proxy`` (as the operator's ServiceAccount: RBAC applies). Every
  operator still running at the end must exit 0 on SIGTERM.
- ``auto_kubelet`` (function): an ``AutoKubelet`` (testkit/auto_kubelet.py)
  playing the kubelet for every pod of the test's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.auto_kubelet import AutoKubelet, playing_kubelet
from testkit.controlplane import ControlPlane
from testkit.fault_proxy import FaultProxy
from testkit.operators import Operators


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    faulty = FaultProxy(upstream=control_plane.server, ca=control_plane.ca_path, seed=7)
    with faulty:
        yield faulty


@pytest.fixture
def proxied_operators(
    control_plane: ControlPlane,
    proxy: FaultProxy,
    rbac_installed: None,
    crd_installed: Any,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Operators]:
    kubeconfig = proxy.write_kubeconfig(
        tmp_path / "proxied.kubeconfig", token=control_plane.operator_token
    )
    group = Operators(kubeconfig, namespace, tmp_path)
    yield group
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for running in group.started:
            print(f"--- operator log ---\n{running.log_tail(80)}")
        print(f"--- faults injected: {dict(proxy.injected)}")
    proxy.set_rules()  # a clean shutdown is checked without faults
    codes = [(r.stop(), r) for r in group.started if r.process.returncode is None]
    for code, running in codes:
        assert code == 0, f"operator exited {code} on SIGTERM:\n{running.log_tail()}"


@pytest.fixture
def auto_kubelet(kube: Client, namespace: str) -> Iterator[AutoKubelet]:
    with playing_kubelet(kube, namespace) as player:
        yield player
