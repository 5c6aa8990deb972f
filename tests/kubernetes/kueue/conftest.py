"""Fixtures for the tests of tfjob under a real Kueue (testkit/kueue.py).

- ``kueue`` (module): Kueue's manager on the session's cluster, managing every kind
  in ``KINDS``, for one test file; as its ``externalFrameworks`` (tfjob makes their
  Workloads, ``--kueue-integration=external``) when the file sets
  ``KUEUE_EXTERNAL = True`` (and in ``multiKueue.externalFrameworks`` too when it
  sets ``KUEUE_MULTIKUEUE = True``); the file's ``KUEUE_KINDS`` instead, when it sets
  them (MPIJob v1 only as an external framework: Kueue's own MPIJob integration is
  v2beta1's; ``TrainJob`` as Kueue's ``trainer.kubeflow.org/trainjob``, the file
  providing a ``trainer_api`` fixture); with the file's ``KUEUE_WAIT_FOR_PODS_READY`` as Kueue's
  ``waitForPodsReady``, when it sets one. Module-scoped so that its webhooks, which the API
  server calls for every job of those kinds, are gone before the session's other
  tests run (a restart costs ~3 s). Skips (fails under ``CI=true``) when it cannot
  be had, like the cluster.
- ``kind`` (function): each test runs once per kind in ``KINDS``: the kinds tfjob's
  operator serves. A kind is added here when the operator serves it.
- ``worker_cluster`` (module): a second control plane standing for a MultiKueue
  worker cluster, with the kinds' CRDs and a Kueue manager of its own (the kinds as
  external frameworks there too under ``KUEUE_MULTIKUEUE``).
- ``queues`` (function): makes this test's ResourceFlavors, ClusterQueues,
  LocalQueues and WorkloadPriorityClasses (cluster-scoped ones get unique names) and
  deletes them after the test.
- ``queued`` (function): the test's jobs of ``kind``, their pods, services, gang
  groups and Kueue Workloads, read through the raw API (every field as stored).
- ``lanes`` (function) and ``every_kind``: a scenario decorated with ``every_kind`` is
  one test that runs it for every kind of the file (its ``KINDS``) at once, each in a
  lane of its own (testkit/lanes.py): the kind's namespace, ``queued``, ``queues``,
  ``operators``, ``nodes`` (tainted for the lane; its jobs' pods tolerate it) and
  ``worker_nodes``; other parameters are the session's or module's fixtures.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from testkit.cluster import Cluster, Nodes
from testkit.controlplane import (
    MANIFESTS_BASE,
    ControlPlane,
    ControlPlaneError,
    ControlPlaneUnavailable,
    apply_documents,
    load_manifest,
)
from testkit.kueue import Kueue, QueuedJobs, Queues, Worker
from testkit.lanes import run_lanes
from testkit.operators import Operators

#: The kinds the operator serves, each run through every scenario.
KINDS = ("TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob")
#: The session fixture that installs each kind's CRD (tests/kubernetes/conftest.py).
CRD_FIXTURES = {
    "TFJob": "crd_installed",
    "PyTorchJob": "pytorchjob_crd_installed",
    "JAXJob": "kind_crds_installed",
    "XGBoostJob": "kind_crds_installed",
    "PaddleJob": "kind_crds_installed",
    "MPIJob": "kind_crds_installed",
    # The test file's own: JobSet's manager, then Trainer's CRDs and runtimes.
    "TrainJob": "trainer_api",
}


def crd_file(kind: str) -> str:
    """The kind's CRD in manifests/base."""
    return "crd.yaml" if kind == "TFJob" else f"{kind.lower()}-crd.yaml"


_KUEUE = pytest.StashKey[Kueue]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report gets Kueue's log tail."""
    report: Any = yield
    kueue = item.config.stash.get(_KUEUE, None)
    if report.failed and kueue is not None:
        report.sections.append(("kueue log", kueue.log_tail(60)))
    return report


@pytest.fixture(scope="module")
def kueue(
    cluster: Cluster,
    control_plane: ControlPlane,
    kube: Client,
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
) -> Iterator[Kueue]:
    """Kueue's manager for the test file, managing every kind in KINDS (as external
    frameworks if the file's KUEUE_EXTERNAL says so). Their CRDs are installed first
    so Kueue sets up their controllers at once."""
    kinds: tuple[str, ...] = getattr(request.module, "KUEUE_KINDS", KINDS)
    for kind in kinds:
        request.getfixturevalue(CRD_FIXTURES[kind])
    external = bool(getattr(request.module, "KUEUE_EXTERNAL", False))
    pods_ready = getattr(request.module, "KUEUE_WAIT_FOR_PODS_READY", None)
    multikueue = bool(getattr(request.module, "KUEUE_MULTIKUEUE", False))
    try:
        binary = control_plane.assets.tool("kueue")
        started = Kueue(
            control_plane,
            kube,
            binary,
            kinds,
            external=external,
            wait_for_pods_ready=pods_ready,
            multikueue=multikueue,
        ).start()
    except ControlPlaneUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"no Kueue: {exc}", pytrace=False)
        pytest.skip(f"no Kueue: {exc}")
    except ControlPlaneError as exc:
        pytest.fail(f"Kueue did not start:\n{exc}", pytrace=False)
    pytestconfig.stash[_KUEUE] = started
    try:
        yield started
    finally:
        del pytestconfig.stash[_KUEUE]
        started.stop()


@pytest.fixture(scope="module")
def worker_cluster(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Worker]:
    """A second control plane as a MultiKueue worker cluster: the kinds' CRDs and a
    Kueue manager of its own (no scheduler or nodes: its pods stay Pending), with
    the kinds (the file's KUEUE_KINDS, else KINDS) as external frameworks when the
    file sets KUEUE_MULTIKUEUE."""
    plane = ControlPlane(control_plane.assets)
    try:
        plane.start()
    except (ControlPlaneUnavailable, ControlPlaneError) as exc:
        pytest.fail(f"the worker cluster did not start:\n{exc}", pytrace=False)
    client = Client(KubeConfig.from_file(plane.kubeconfig_path), field_manager="tfjob-tests")
    multikueue = bool(getattr(request.module, "KUEUE_MULTIKUEUE", False))
    binary = control_plane.assets.tool("kueue")
    kinds: tuple[str, ...] = getattr(request.module, "KUEUE_KINDS", KINDS)
    kueue = Kueue(plane, client, binary, kinds, external=multikueue, multikueue=multikueue)
    try:
        for kind in kinds:
            apply_documents(client, load_manifest(MANIFESTS_BASE / crd_file(kind)))
        kueue.start()
        yield Worker(plane, client, kueue)
    except ControlPlaneError as exc:
        pytest.fail(f"Kueue did not start on the worker cluster:\n{exc}", pytrace=False)
    finally:
        kueue.stop()
        client.close()
        plane.stop()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


# -- per test ---------------------------------------------------------------------


@pytest.fixture
def queues(kueue: Kueue, control_plane: ControlPlane, namespace: str) -> Iterator[Queues]:
    made = Queues(control_plane, namespace)
    yield made
    made.cleanup()


@pytest.fixture
def queued(kueue: Kueue, control_plane: ControlPlane, namespace: str, kind: str) -> QueuedJobs:
    return QueuedJobs(control_plane, namespace, kind)


# -- lanes: every kind at once ----------------------------------------------------------

#: The taint on a lane's nodes, valued with its namespace.
LANE_TAINT = "tfjob.test/lane"


@dataclass
class Lane:
    """One kind's own part of the cluster for one scenario."""

    kind: str
    namespace: str
    queued: QueuedJobs
    queues: Queues
    operators: Operators
    nodes: Nodes
    tmp_path: Path
    worker_nodes: Nodes | None = None

    def close(self) -> None:
        """Queues, nodes and namespace go; every operator must stop cleanly."""
        self.queues.cleanup()
        self.nodes.remove_all()
        if self.worker_nodes is not None:
            self.worker_nodes.remove_all()
        codes = [(r.stop(), r) for r in self.operators.started if r.process.returncode is None]
        for code, running in codes:
            assert code == 0, f"{self.kind}: operator exited {code}:\n{running.log_tail()}"

    def logs(self) -> str:
        return "".join(
            f"--- operator log ({' '.join(r.args[-6:])}) ---\n{r.log_tail(80)}\n"
            for r in self.operators.started
        )


@dataclass
class Lanes:
    request: pytest.FixtureRequest
    lanes: dict[str, Lane]

    def run(self, scenario: Callable[..., None]) -> None:
        names = list(inspect.signature(scenario).parameters)
        shared = {n: self.request.getfixturevalue(n) for n in names if n not in _PER_LANE}
        if "worker_nodes" in names:
            self.request.getfixturevalue("worker_kwok")
            worker: Worker = self.request.getfixturevalue("worker_cluster")
            for lane in self.lanes.values():
                lane.worker_nodes = Nodes(worker.kube, lane.namespace, taint=_taint(lane.namespace))

        def runner(lane: Lane) -> Callable[[], None]:
            return lambda: scenario(
                **shared, **{n: getattr(lane, n) for n in names if n in _PER_LANE}
            )

        run_lanes(
            {kind: runner(lane) for kind, lane in self.lanes.items()},
            lambda kind: self.lanes[kind].logs(),
        )


_PER_LANE = frozenset(
    ("kind", "namespace", "queued", "queues", "operators", "nodes", "tmp_path", "worker_nodes")
)


def _taint(namespace: str) -> dict[str, str]:
    return {"key": LANE_TAINT, "value": namespace, "effect": "NoSchedule"}


@pytest.fixture
def lanes(
    kueue: Kueue,
    control_plane: ControlPlane,
    kube: Client,
    cluster: Cluster,
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Lanes]:
    kinds: tuple[str, ...] = getattr(request.module, "KINDS", KINDS)
    made: dict[str, Lane] = {}
    try:
        for kind in kinds:
            made[kind] = _lane(kind, control_plane, kube, operator_kubeconfig, tmp_path, request)
        yield Lanes(request, made)
    finally:
        errors = []
        for lane in made.values():
            try:
                lane.close()
            except AssertionError as exc:
                errors.append(str(exc))
            with contextlib.suppress(ApiError):
                kube.delete(Namespace, lane.namespace)
        assert not errors, "\n".join(errors)


def _lane(
    kind: str,
    plane: ControlPlane,
    kube: Client,
    operator_kubeconfig: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Lane:
    stem = request.node.name.removeprefix("test_").replace("_", "-")[:32].strip("-")
    namespace = f"{stem}-{kind.lower()}-{secrets.token_hex(2)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels={"tfjob-test": "true"})))
    folder = tmp_path / kind
    folder.mkdir()
    taint = _taint(namespace)
    toleration = {**taint, "operator": "Equal"}
    return Lane(
        kind=kind,
        namespace=namespace,
        queued=QueuedJobs(plane, namespace, kind, tolerations=(toleration,)),
        queues=Queues(plane, namespace),
        operators=Operators(operator_kubeconfig, namespace, folder),
        nodes=Nodes(kube, namespace, taint=taint),
        tmp_path=folder,
    )


def every_kind(scenario: Callable[..., None]) -> Callable[[Lanes], None]:
    """The scenario as one test run for every kind of the file at once (``lanes``)."""

    def test(lanes: Lanes) -> None:
        lanes.run(scenario)

    test.__name__ = scenario.__name__
    test.__qualname__ = scenario.__qualname__
    test.__doc__ = scenario.__doc__
    test.__module__ = scenario.__module__
    return test
