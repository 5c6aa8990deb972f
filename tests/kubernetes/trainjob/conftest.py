"""Fixtures for TrainJob tests: JobSet's and Kubeflow Trainer's real managers.

- ``jobset`` (session): JobSet's controller manager (testkit/jobset.py) on the
  session's cluster, its webhooks on loopback. Every TrainJob, whoever reconciles
  it, becomes a JobSet, so one manager serves the whole session; its webhooks touch
  only JobSets and pods labelled with a JobSet's name. Needs the ``cluster`` (the
  Job controller makes the pods of its Jobs).
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

import os
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from lightkube import Client

from testkit.cluster import Cluster
from testkit.controlplane import ControlPlane, ControlPlaneError, ControlPlaneUnavailable
from testkit.jobset import JobSetManager
from testkit.manager_process import LoopbackManager
from testkit.trainer import TrainerManager
from testkit.trainjobs import TrainJobs

_MANAGERS = pytest.StashKey[dict[str, LoopbackManager]]()
M = TypeVar("M", bound=LoopbackManager)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report gets the running managers' log tails."""
    report: Any = yield
    if report.failed:
        for name, manager in item.config.stash.get(_MANAGERS, {}).items():
            report.sections.append((f"{name} log", manager.log_tail(60)))
    return report


def _start(
    manager_class: type[M],
    tool: str,
    plane: ControlPlane,
    kube: Client,
    config: pytest.Config,
) -> M:
    """Start one manager, or skip (fail under CI=true) when it cannot be had."""
    try:
        started = manager_class(plane, kube, plane.assets.tool(tool)).start()
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"no {manager_class.name}: {exc}", pytrace=False)
        pytest.skip(f"no {manager_class.name}: {exc}")
    except ControlPlaneError as exc:
        pytest.fail(f"{manager_class.name} did not start:\n{exc}", pytrace=False)
    config.stash.setdefault(_MANAGERS, {})[manager_class.name] = started
    return started


def _stop(manager: LoopbackManager, config: pytest.Config) -> None:
    config.stash.get(_MANAGERS, {}).pop(manager.name, None)
    manager.stop()


@pytest.fixture(scope="session")
def jobset(
    cluster: Cluster, control_plane: ControlPlane, kube: Client, pytestconfig: pytest.Config
) -> Iterator[JobSetManager]:
    """JobSet's controller manager for the session."""
    manager = _start(JobSetManager, "jobset-controller-manager", control_plane, kube, pytestconfig)
    try:
        yield manager
    finally:
        _stop(manager, pytestconfig)


@pytest.fixture(scope="module")
def trainer(
    jobset: JobSetManager, control_plane: ControlPlane, kube: Client, pytestconfig: pytest.Config
) -> Iterator[TrainerManager]:
    """Kubeflow Trainer's controller manager for one test file."""
    manager = _start(
        TrainerManager, "trainer-controller-manager", control_plane, kube, pytestconfig
    )
    try:
        yield manager
    finally:
        _stop(manager, pytestconfig)


@pytest.fixture
def trainjobs(jobset: JobSetManager, control_plane: ControlPlane, namespace: str) -> TrainJobs:
    return TrainJobs(control_plane, namespace)
