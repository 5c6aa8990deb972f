"""Fixtures for the chaos tests: the operator's own fixtures, plus a fault proxy.

- ``proxy`` (function): a ``FaultProxy`` (tests/support/fault_proxy.py) in front of the
  session's API server, with no rules yet; stopped after the test.
- ``proxied_operators`` (function): like ``operators``, but each operator reaches the
  API server through ``proxy`` (as the operator's ServiceAccount: RBAC applies). Every
  operator still running at the end must exit 0 on SIGTERM.
- ``auto_kubelet`` (function): a background thread that plays the kubelet for every pod
  of the test's namespace: a new pod goes Running, a Running pod Succeeds after
  ``hold`` seconds (or fails with 137 the first time, for names in ``fail_first``).
  It remembers every UID each pod name had.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod

from tests.kubernetes.operator.cluster import Operators
from tests.kubernetes.operator.conftest import (  # noqa: F401 - fixtures, re-exported
    jobs,
    operator,
    operators,
    pytest_runtest_makereport,
)
from tests.support.controlplane import ControlPlane
from tests.support.fault_proxy import FaultProxy
from tests.support.kubelet import FakeKubelet


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


@dataclass
class AutoKubelet:
    """Runs every new pod and completes every Running one after `hold` seconds."""

    kube: Client
    namespace: str
    hold: float = 0.5
    fail_first: set[str] = field(default_factory=set)  # these pods' first run exits 137
    uids: dict[str, set[str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _running_since: dict[str, float] = field(default_factory=dict)

    def loop(self) -> None:
        kubelet = FakeKubelet(self.kube)
        while not self._stop.wait(0.2):
            with contextlib.suppress(Exception):  # an API server restart, a racing delete
                for pod in self.kube.list(Pod, namespace=self.namespace):
                    self._step(kubelet, pod)

    def _step(self, kubelet: FakeKubelet, pod: Pod) -> None:
        meta = pod.metadata
        if meta is None or meta.name is None or meta.deletionTimestamp is not None:
            return
        self.uids.setdefault(meta.name, set()).add(str(meta.uid))
        phase = pod.status.phase if pod.status is not None else None
        key = f"{meta.name}/{meta.uid}"
        try:
            if phase in (None, "Pending"):
                kubelet.run(self.namespace, meta.name)
                self._running_since[key] = time.monotonic()
            elif phase == "Running":
                since = self._running_since.setdefault(key, time.monotonic())
                if time.monotonic() - since < self.hold:
                    return
                if meta.name in self.fail_first and len(self.uids[meta.name]) == 1:
                    kubelet.fail(self.namespace, meta.name, 137, "OOMKilled")
                else:
                    kubelet.succeed(self.namespace, meta.name)
        except ApiError:
            pass

    def stop(self) -> None:
        self._stop.set()


@contextlib.contextmanager
def playing_kubelet(kube: Client, namespace: str, **options: Any) -> Iterator[AutoKubelet]:
    """An AutoKubelet running in a thread for the duration of the block."""
    player = AutoKubelet(kube, namespace, **options)
    thread = threading.Thread(target=player.loop, daemon=True)
    thread.start()
    try:
        yield player
    finally:
        player.stop()
        thread.join(10)


@pytest.fixture
def auto_kubelet(kube: Client, namespace: str) -> Iterator[AutoKubelet]:
    with playing_kubelet(kube, namespace) as player:
        yield player
