"""Swapping Kubeflow Trainer v2.3.0's controller for tfjob's with TrainJobs running,
and back: the operator that takes over adopts every TrainJob as it is.

Three TrainJobs are in flight at the swap: a torch one and an MPI one (deepspeed: a
launcher, an ssh Secret, a hostfile) with their pods Running on a kwok node, and a
suspended one. "Adopts" means, as a user would check: the JobSets are not recreated
or changed (same uid, same generation), nor their Jobs, pods and headless Services;
the runtime snapshots, the hostfile and the Secret are kept as they are (same uid,
same resourceVersion: not rewritten); each TrainJob's status goes on from where the
other controller left it; then the suspended one resumes under the new controller
and every TrainJob reaches Complete when its pods end.

Trainer is stopped (its webhooks removed, testkit/manager_process.py) before tfjob's
operator starts and the other way round: two controllers on one TrainJob would each
apply its objects (docs/migrate.md, "Between Kubeflow Trainer and tfjob").
Before tfjob takes over, its manifests are applied over Trainer's CRDs, and before
Trainer does, Trainer's own (each as its install does): the stored objects pass
either schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from lightkube import Client

from testkit.cluster import KwokPods
from testkit.controlplane import ControlPlane, ControlPlaneUnavailable
from testkit.helpers import wait_for
from testkit.jobset import JobSetManager
from testkit.operators import Operators, RunningOperator
from testkit.trainer import TrainerManager
from testkit.trainjob_fixtures import install_trainer_api
from testkit.trainjobs import TrainJobs, ending, trainjob

SETTLE = 2.0  # a few passes' time for a wrong write to show
CONTROLLER = "trainjob_controller"


@dataclass(frozen=True)
class Flight:
    """One TrainJob carried across the swap: its runtime, its nodes (one pod each)."""

    name: str
    runtime: str
    nodes: int
    suspended: bool = False

    def manifest(self) -> dict[str, Any]:
        # The suspended one's pods end as soon as they run (it resumes after the swap).
        patches = [ending(0)] if self.suspended else None
        made = trainjob(self.name, self.runtime, num_nodes=self.nodes, patches=patches)
        made["spec"]["suspend"] = self.suspended
        return made


FLIGHTS = (
    Flight("torch", "torch-distributed", nodes=2),
    Flight("mpi", "deepspeed-distributed", nodes=2),  # the launcher is node 0
    Flight("held", "torch-distributed", nodes=1, suspended=True),
)
RUNNING = [f for f in FLIGHTS if not f.suspended]


@pytest.fixture(scope="module")
def trainer_binary(jobset: JobSetManager, control_plane: ControlPlane) -> Any:
    try:
        return control_plane.assets.tool("trainer-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no Kubeflow Trainer: {exc}")


def install_tfjobs_api(control_plane: ControlPlane, kube: Client) -> None:
    """tfjob's manifests for TrainJob (CRDs, the Secret role, the runtimes)."""
    install_trainer_api(control_plane, kube)


# -- what is checked -------------------------------------------------------------------


def _get(trainjobs: TrainJobs, path: str) -> dict[str, Any] | None:
    status, body = trainjobs.plane.request("GET", path)
    if status == 404:
        return None
    assert status == 200, f"GET {path}: {status} {body}"
    found: dict[str, Any] = body
    return found


def _identity(obj: dict[str, Any] | None) -> tuple[str, str] | None:
    return None if obj is None else (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])


def side_objects(trainjobs: TrainJobs, flight: Flight) -> dict[str, tuple[str, str] | None]:
    """The snapshot, and an MPI runtime's Secret and hostfile: uid and resourceVersion."""
    core = f"/api/v1/namespaces/{trainjobs.namespace}"
    names = {"snapshot": f"{core}/configmaps/{flight.name}-runtime-snapshot"}
    if flight.runtime.startswith("deepspeed"):
        names["secret"] = f"{core}/secrets/{flight.name}-mpi-ssh-auth"
        names["hostfile"] = f"{core}/configmaps/{flight.name}-mpi-hostfile"
    return {what: _identity(_get(trainjobs, path)) for what, path in names.items()}


def services(trainjobs: TrainJobs, name: str) -> dict[str, str]:
    """The JobSet's headless Service (named after it), by name -> uid."""
    found = _get(trainjobs, f"/api/v1/namespaces/{trainjobs.namespace}/services/{name}")
    return {} if found is None else {name: found["metadata"]["uid"]}


@dataclass(frozen=True)
class State:
    """What must not change across the swap, per TrainJob."""

    jobset: tuple[str, int]  # uid, generation
    jobs: dict[str, str]
    pods: dict[str, str]
    services: dict[str, str]
    side: dict[str, tuple[str, str] | None]
    status: dict[str, Any]


def state(trainjobs: TrainJobs, flight: Flight) -> State:
    jobset = trainjobs.jobset(flight.name)
    assert jobset is not None, f"no JobSet {flight.name}"
    meta = jobset["metadata"]
    return State(
        jobset=(meta["uid"], meta["generation"]),
        jobs={j["metadata"]["name"]: j["metadata"]["uid"] for j in trainjobs.jobs(flight.name)},
        pods={p["metadata"]["name"]: p["metadata"]["uid"] for p in trainjobs.pods(flight.name)},
        services=services(trainjobs, flight.name),
        side=side_objects(trainjobs, flight),
        status=trainjobs.get(flight.name).get("status") or {},
    )


def settled(trainjobs: TrainJobs, flight: Flight) -> bool:
    """Its pods are Running and its status says so: every Job of its JobSet ready (a
    running one), or the Suspended condition (the suspended one)."""
    if flight.suspended:
        return trainjobs.condition(flight.name, "Suspended") is not None and bool(
            trainjobs.jobset(flight.name)
        )
    pods = trainjobs.pods(flight.name)
    if len(pods) != flight.nodes or any(p["status"].get("phase") != "Running" for p in pods):
        return False
    jobs = (trainjobs.get(flight.name).get("status") or {}).get("jobsStatus") or []
    return bool(jobs) and all(j.get("ready") == j.get("active") == 1 for j in jobs)


def _settled(trainjobs: TrainJobs, flight: Flight) -> Callable[[], bool]:
    return lambda: settled(trainjobs, flight)


def start_flights(trainjobs: TrainJobs) -> dict[str, State]:
    for flight in FLIGHTS:
        trainjobs.create(flight.manifest())
    for flight in FLIGHTS:
        wait_for(
            _settled(trainjobs, flight),
            60,
            interval=0.1,
            message=f"TrainJob {flight.name} running (or suspended)",
        )
    before = {f.name: state(trainjobs, f) for f in FLIGHTS}
    for flight in RUNNING:  # what check_adopted compares is there to compare
        was = before[flight.name]
        assert len(was.pods) == flight.nodes and was.jobs and was.services, (flight.name, was)
        assert None not in was.side.values(), (flight.name, was.side)
    return before


def check_adopted(trainjobs: TrainJobs, before: dict[str, State]) -> None:
    """Nothing recreated, rewritten or restarted; the statuses carried on as they were."""
    for flight in RUNNING:
        now = state(trainjobs, flight)
        was = before[flight.name]
        assert now.jobset == was.jobset, f"{flight.name}: JobSet recreated or changed"
        assert now.jobs == was.jobs, f"{flight.name}: a Job deleted or created"
        assert now.pods == was.pods, f"{flight.name}: a pod deleted or created"
        assert now.services == was.services, f"{flight.name}: its Service recreated"
        assert now.side == was.side, f"{flight.name}: snapshot, Secret or hostfile rewritten"
        assert now.status == was.status, f"{flight.name}: status not carried on"
    held = state(trainjobs, FLIGHTS[2])
    assert held.jobset == before["held"].jobset, "the suspended TrainJob's JobSet changed"
    assert held.side == before["held"].side, "the suspended TrainJob's snapshot rewritten"
    assert held.status == before["held"].status


def resume_and_finish(trainjobs: TrainJobs, kwok: KwokPods, before: dict[str, State]) -> None:
    """Resume the held TrainJob (its pods end at once), end the running ones' pods; each
    TrainJob Complete, from the JobSet it had."""
    _patch(trainjobs, "held", {"spec": {"suspend": False}})
    for flight in RUNNING:
        for pod in trainjobs.pods(flight.name):
            kwok.end(trainjobs.namespace, pod["metadata"]["name"])
    for flight in FLIGHTS:
        finished = trainjobs.wait_finished(flight.name, timeout=60)
        assert (finished["type"], finished["reason"]) == ("Complete", "AllJobsCompleted"), (
            flight.name,
            finished,
        )
        jobset = trainjobs.jobset(flight.name)
        assert jobset is not None and jobset["metadata"]["uid"] == before[flight.name].jobset[0]
        assert side_objects(trainjobs, flight) == before[flight.name].side, flight.name
    resumed = trainjobs.get("held")["status"]["conditions"]
    assert ("Suspended", "False", "Resumed") in [
        (c["type"], c["status"], c["reason"]) for c in resumed
    ]


def _patch(trainjobs: TrainJobs, name: str, patch: dict[str, Any]) -> None:
    status, body = trainjobs.plane.request(
        "PATCH",
        f"{trainjobs.path}/{name}",
        body=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, f"patch TrainJob {name}: {status} {body}"


def reconciled(operator: RunningOperator, count: int) -> Callable[[], bool]:
    def done() -> bool:
        passes = operator.metric(
            "controller_runtime_reconcile_total", controller=CONTROLLER, result="success"
        )
        return passes >= count

    return done


# -- the two ways ----------------------------------------------------------------------


def test_tfjob_adopts_trainjobs_trainer_started(
    trainer_binary: Any,
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    trainjobs: TrainJobs,
    kwok: KwokPods,
) -> None:
    install_tfjobs_api(control_plane, kube)  # the operator's Secret role
    with TrainerManager(control_plane, kube, trainer_binary):
        before = start_flights(trainjobs)
    install_tfjobs_api(control_plane, kube)  # tfjob's CRDs over Trainer's
    tfjob = operators.start("--enable-scheme=trainjob")
    wait_for(reconciled(tfjob, len(FLIGHTS)), 30, message="tfjob's first pass of each")
    time.sleep(SETTLE)
    check_adopted(trainjobs, before)
    resume_and_finish(trainjobs, kwok, before)


def test_trainer_adopts_trainjobs_tfjob_started(
    trainer_binary: Any,
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    trainjobs: TrainJobs,
    kwok: KwokPods,
) -> None:
    """The way back: Trainer reads tfjob's JobSets, snapshots, Secret and statuses as
    its own (its first passes run as it starts; it serves no metrics here)."""
    install_tfjobs_api(control_plane, kube)
    tfjob = operators.start("--enable-scheme=trainjob")
    before = start_flights(trainjobs)
    assert tfjob.stop() == 0
    with TrainerManager(control_plane, kube, trainer_binary):
        time.sleep(SETTLE)
        check_adopted(trainjobs, before)
        resume_and_finish(trainjobs, kwok, before)
