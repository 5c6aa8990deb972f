"""Fixtures for the operator's tests on the real control plane.

- ``operators`` (function): starts ``tfjob operator`` subprocesses on demand, as the
  operator's ServiceAccount (so RBAC from manifests/base is exercised), each watching
  only the test's namespace (namespaces of earlier tests linger, Terminating, without
  a controller-manager). Every operator still running at the end gets SIGTERM and
  must exit 0 within 20 s: every test also checks the graceful shutdown.
- ``operator`` (function): one operator for the test's namespace, ready (``/readyz``).
- ``jobs`` (function): the test's namespace through an admin client - create TFJobs,
  read them, list pods/services/events, wait for conditions (tests/.../cluster.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from tests.kubernetes.operator.cluster import Jobs, Operators, RunningOperator


@pytest.fixture
def operators(
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Operators]:
    group = Operators(operator_kubeconfig, namespace, tmp_path)
    yield group
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for running in group.started:
            print(f"--- operator log ({' '.join(running.args[-6:])}) ---\n{running.log_tail(80)}")
    codes = [(r.stop(), r) for r in group.started if r.process.returncode is None]
    for code, running in codes:
        assert code == 0, f"operator exited {code} on SIGTERM:\n{running.log_tail()}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


@pytest.fixture
def operator(operators: Operators) -> RunningOperator:
    return operators.start()


@pytest.fixture
def jobs(kube: Client, namespace: str, crd_installed: Any) -> Jobs:
    return Jobs(kube, namespace)
