"""Fixtures for driving our operator with Kubeflow's own Python SDK (``kubeflow-training``).

- ``kubeflow_sdk`` (session): the ``kubeflow.training`` module. When it is not
  importable the test is skipped with a one-line reason, or failed when the
  environment has ``CI=true`` (CI must never pass by skipping).
- ``operator`` (module): a ``tfjob operator`` subprocess watching every namespace,
  running as the operator's ServiceAccount (RBAC from manifests/base applied), so
  the SDK meets what an in-cluster deployment gives a user. It is ready once
  ``/readyz`` answers 200, and is stopped with SIGTERM at the end. When a test that
  used it fails, the tail of its log is added to the report.
- ``operator_alive`` (autouse): fails a test during which the operator exited.
- ``training_client`` (function): ``TrainingClient(config_file=<admin kubeconfig>,
  namespace=<the test's namespace>, job_kind="TFJob")``, the way a user builds one;
  ``pytorch_client`` (function): the same with ``job_kind="PyTorchJob"``.

The TFJob and PyTorchJob CRDs are installed before the operator starts, so it serves
both kinds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from testkit.helpers import free_port
from testkit.tfjob_cli import tfjob_command

_HERE = Path(__file__).resolve().parent
_OPERATOR = pytest.StashKey["OperatorProcess"]()
_PR_SET_PDEATHSIG = 1
_READY_TIMEOUT = 60.0

_STOP_TIMEOUT = 20.0


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def kubeflow_sdk() -> ModuleType:
    """The ``kubeflow.training`` package, or a skip (a failure under ``CI=true``)."""
    try:
        import kubeflow.training as sdk
    except ImportError as exc:
        reason = f"kubeflow-training is not importable: {exc}"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return sdk


@dataclass
class OperatorProcess:
    """A running ``tfjob operator`` and where its output goes."""

    process: subprocess.Popen[bytes]
    log_path: Path
    health_port: int
    metrics_port: int

    def log_tail(self, lines: int = 80) -> str:
        try:
            with self.log_path.open(errors="replace") as handle:
                return "".join(deque(handle, maxlen=lines))
        except OSError:
            return ""


def _die_with_parent(parent_pid: int) -> None:
    """preexec_fn: the kernel SIGKILLs the operator if pytest dies without teardown."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(operator: OperatorProcess) -> None:
    process = operator.process
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        warnings.warn(
            f"tfjob operator ignored SIGTERM for {_STOP_TIMEOUT:.0f} s and was killed; "
            f"log tail:\n{operator.log_tail(30)}",
            stacklevel=1,
        )


@pytest.fixture(scope="module")
def operator(
    kubeflow_sdk: ModuleType,
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    pytorchjob_crd_installed: None,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[OperatorProcess]:
    """``tfjob operator`` watching all namespaces, ready before the first test."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    health_port, metrics_port = free_port(), free_port()
    args = [
        *tfjob_command(),
        "operator",
        "--kubeconfig",
        str(operator_kubeconfig),
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
    ]
    parent = os.getpid()
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: _die_with_parent(parent),
        )
    running = OperatorProcess(process, log_path, health_port, metrics_port)
    pytestconfig.stash[_OPERATOR] = running
    try:
        deadline = time.monotonic() + _READY_TIMEOUT
        while not _ready(health_port):
            if process.poll() is not None:
                pytest.fail(
                    f"tfjob operator exited with code {process.returncode} before it was "
                    f"ready: {' '.join(args)}\n{running.log_tail()}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"tfjob operator not ready (/readyz on :{health_port}) within "
                    f"{_READY_TIMEOUT:.0f} s\n{running.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.2)
        yield running
    finally:
        _stop(running)
        del pytestconfig.stash[_OPERATOR]


@pytest.fixture(autouse=True)
def operator_alive(operator: OperatorProcess) -> Iterator[OperatorProcess]:
    """Every test here runs against the operator, which must outlive the test.

    An operator that exits on its own (even with code 0) leaves users' jobs
    unreconciled; that fails the test during which it happened.
    """
    if operator.process.poll() is not None:
        pytest.fail(
            f"tfjob operator exited (code {operator.process.returncode}) before this test",
            pytrace=False,
        )
    yield operator
    if operator.process.poll() is not None:
        pytest.fail(
            f"tfjob operator exited on its own (code {operator.process.returncode}) during "
            f"this test; log tail:\n{operator.log_tail(40)}",
            pytrace=False,
        )


@pytest.fixture
def training_client(kubeflow_sdk: ModuleType, kubeconfig: Path, namespace: str) -> Any:
    """Kubeflow's ``TrainingClient`` for TFJobs in the test's namespace (admin user)."""
    return kubeflow_sdk.TrainingClient(
        config_file=str(kubeconfig), namespace=namespace, job_kind="TFJob"
    )


@pytest.fixture
def pytorch_client(kubeflow_sdk: ModuleType, kubeconfig: Path, namespace: str) -> Any:
    """Kubeflow's ``TrainingClient`` for PyTorchJobs in the test's namespace (admin user)."""
    return kubeflow_sdk.TrainingClient(
        config_file=str(kubeconfig), namespace=namespace, job_kind="PyTorchJob"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the operator's log tail to the report of a failed test that used it."""
    report: Any = yield
    running = item.config.stash.get(_OPERATOR, None)
    if (
        report.failed
        and running is not None
        and _HERE in Path(str(item.path)).resolve().parents
        and "operator" in getattr(item, "fixturenames", ())
        and report.when == "call"
    ):
        exited = running.process.poll()
        header = "" if exited is None else f"(operator exited with code {exited})\n"
        report.sections.append(("tfjob operator log", header + running.log_tail(80)))
    return report  # type: ignore[no-any-return]
