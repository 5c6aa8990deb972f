"""The TrainJob tests' managers as pytest fixtures, for every folder that runs TrainJobs.

tests/kubernetes/trainjob (conftest.py) and tests/kubernetes/cli (test_trainjobs.py)
both need JobSet's controller manager; a fixture is seen only below the conftest that
defines it, so each imports ``jobset`` from here. Pytest then holds two definitions,
each with its own session cache, and a worker that runs both folders would start two
JobSet managers on one cluster (two controllers of every JobSet, two sets of webhooks).
So the fixture shares one manager per session: the first use starts it, the last
one's teardown stops it.

``start_manager``/``stop_manager`` start any manager (JobSet's, Trainer's) or skip
with a one-line reason when its binary or manifests are missing (fail under
``CI=true``), and fail when they exist but do not start; the running ones are kept in
``MANAGERS`` so that a conftest's report hook can add their log tails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import pytest
from lightkube import Client

from testkit import trainjob_api
from testkit.cluster import Cluster
from testkit.controlplane import ControlPlane, ControlPlaneError, ControlPlaneUnavailable
from testkit.jobset import JobSetManager
from testkit.manager_process import LoopbackManager

#: The managers running now, by name (a report hook adds their log tails).
MANAGERS = pytest.StashKey[dict[str, LoopbackManager]]()
M = TypeVar("M", bound=LoopbackManager)


@dataclass
class _Shared:
    manager: JobSetManager
    users: int = 0


_JOBSET = pytest.StashKey[_Shared]()


def start_manager(
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
        unavailable(manager_class.name, exc)
    except ControlPlaneError as exc:
        pytest.fail(f"{manager_class.name} did not start:\n{exc}", pytrace=False)
    config.stash.setdefault(MANAGERS, {})[manager_class.name] = started
    return started


def unavailable(what: str, exc: Exception) -> NoReturn:
    """Skip with a one-line reason, or fail under CI=true (a CI run never passes by
    skipping)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"no {what}: {exc}", pytrace=False)
    pytest.skip(f"no {what}: {exc}")


def install_trainer_api(plane: ControlPlane, kube: Client) -> list[dict[str, Any]]:
    """Trainer's API as tfjob ships it and Trainer's runtimes (testkit/trainjob_api.py),
    or skip/fail as `unavailable` when the runtimes are not beside the built binary."""
    try:
        return trainjob_api.install(plane, kube)
    except ControlPlaneUnavailable as exc:
        unavailable("Trainer runtimes", exc)


@pytest.fixture(scope="module")
def trainer_api(
    jobset: JobSetManager, control_plane: ControlPlane, kube: Client
) -> list[dict[str, Any]]:
    """Trainer's CRDs as tfjob ships them and the runtimes Trainer ships, for one test
    file: JobSet's manager first (its webhook checks the JobSets), and before Kueue
    starts where a file queues TrainJobs (Kueue builds their pod sets from the runtime:
    tests/kubernetes/kueue/conftest.py's CRD_FIXTURES)."""
    return install_trainer_api(control_plane, kube)


def stop_manager(manager: LoopbackManager, config: pytest.Config) -> None:
    config.stash.get(MANAGERS, {}).pop(manager.name, None)
    manager.stop()


@pytest.fixture(scope="session")
def jobset(
    cluster: Cluster, control_plane: ControlPlane, kube: Client, pytestconfig: pytest.Config
) -> Iterator[JobSetManager]:
    """JobSet's controller manager for the session, one however many folders ask."""
    shared = pytestconfig.stash.get(_JOBSET, None)
    if shared is None:
        manager = start_manager(
            JobSetManager, "jobset-controller-manager", control_plane, kube, pytestconfig
        )
        shared = pytestconfig.stash[_JOBSET] = _Shared(manager)
    shared.users += 1
    try:
        yield shared.manager
    finally:
        shared.users -= 1
        if shared.users == 0:
            del pytestconfig.stash[_JOBSET]
            stop_manager(shared.manager, pytestconfig)
