"""Fixtures for TrainJob tests: JobSet's and Kubeflow Trainer's real managers.

- ``jobset`` (session): JobSet's controller manager (testkit/jobset.py) on the
  session's cluster, its webhooks on loopback. Every TrainJob, whoever reconciles
  it, becomes a JobSet, so one manager serves the whole session; its webhooks touch
  only JobSets and pods labelled with a JobSet's name. Needs the ``cluster`` (the
  Job controller makes the pods of its Jobs). The fixture is
  testkit/trainjob_fixtures.py's, which tests/kubernetes/cli shares.
- ``trainer`` (module): Kubeflow Trainer's controller manager (testkit/trainer.py),
  the reference operator, with its CRDs and shipped runtimes installed. Module-scoped:
  it reconciles every TrainJob of the cluster and its webhooks admit them, so it
  must be gone before another file's tests hand TrainJobs to tfjob (a start costs
  a few seconds).
- ``trainjobs`` (function): the test's TrainJobs and their JobSet, Jobs and pods,
  read through the raw API (testkit/trainjobs.py).

Each skips with a one-line reason when its binary or manifests are missing (fails
under ``CI=true``), and fails when they exist but do not start. A failed test's
report gets both managers' log tails.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client

from testkit.controlplane import ControlPlane
from testkit.jobset import JobSetManager
from testkit.trainer import TrainerManager
from testkit.trainjob_fixtures import MANAGERS, jobset, start_manager, stop_manager, trainer_api
from testkit.trainjobs import TrainJobs

__all__ = ["jobset", "trainer_api"]  # testkit/trainjob_fixtures.py: shared by folders


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report gets the running managers' log tails."""
    report: Any = yield
    if report.failed:
        for name, manager in item.config.stash.get(MANAGERS, {}).items():
            report.sections.append((f"{name} log", manager.log_tail(60)))
    return report


@pytest.fixture(scope="module")
def trainer(
    jobset: JobSetManager, control_plane: ControlPlane, kube: Client, pytestconfig: pytest.Config
) -> Iterator[TrainerManager]:
    """Kubeflow Trainer's controller manager for one test file."""
    manager = start_manager(
        TrainerManager, "trainer-controller-manager", control_plane, kube, pytestconfig
    )
    try:
        yield manager
    finally:
        stop_manager(manager, pytestconfig)


@pytest.fixture
def trainjobs(jobset: JobSetManager, control_plane: ControlPlane, namespace: str) -> TrainJobs:
    return TrainJobs(control_plane, namespace)
