"""Swapping Kubeflow's training-operator (v1.9.4, the real binary, every scheme on) for
tfjob in the middle of running jobs, and back: the new operator adopts them as they are.

One job of every kind tfjob serves is mid-flight at the swap. "Adopts" means, as a
user would check: not one pod or service is deleted or created again (same names and
UIDs, nothing extra), each status goes on from where the other operator left it (same
Created/Running conditions and startTime), and every job then reaches Succeeded when
its pods finish. docs/migrate.md is the user's side of this.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators, RunningOperator
from testkit.training_operator import Kubeflow, stop
from tfjob.api import constants as c
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import FRAMEWORKS

SETTLE = 2.0  # a few reconciles' time for anything wrong to show up
IMAGE = "registry.example/train:1"
KINDS = list(FRAMEWORKS.values())


@dataclass(frozen=True)
class InFlight:
    """One kind's job carried across the swap."""

    jobs: Jobs
    name: str
    pods: tuple[str, ...]  # Workers first: the master type's pod finishes last

    @property
    def kind(self) -> Framework[Any]:
        return self.jobs.kind  # type: ignore[return-value]


def _job_of(namespace: Jobs, kind: Framework[Any]) -> InFlight:
    """A master type's replica (if the kind has one) and two Workers, OnFailure."""
    container = {"name": kind.container_name, "image": IMAGE}
    one = {"restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}
    specs: dict[str, Any] = {c.WORKER: {"replicas": 2, **one}}
    if kind.master_types:
        specs = {kind.master_types[0]: {"replicas": 1, **one}, **specs}
    name = f"swap-{kind.kind.lower().removesuffix('job')}"
    pods = tuple(
        sorted(
            (kind.pod_name(name, t, i) for t, s in specs.items() for i in range(s["replicas"])),
            key=lambda pod: ("-worker-" not in pod, pod),
        )
    )
    jobs = namespace.of(kind)
    jobs.create(name, specs)
    return InFlight(jobs, name, pods)


@pytest.fixture
def kubeflow(
    kube: Client,
    kubeconfig: Path,
    namespace: str,
    crd_installed: Any,
    pytorchjob_crd_installed: None,
    kind_crds_installed: None,
    tmp_path: Path,
) -> Iterator[Kubeflow]:
    schemes = tuple(k.scheme for k in KINDS)
    runner = Kubeflow(kube, kubeconfig, namespace, tmp_path, schemes=schemes)
    started: list[RunningOperator] = []
    original = runner.start

    def start() -> RunningOperator:
        running = original()
        started.append(running)
        return running

    runner.start = start  # type: ignore[method-assign]
    yield runner
    for running in started:
        stop(running)


def uids(objects: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: obj["metadata"]["uid"] for name, obj in objects.items()}


Snapshot = tuple[dict[str, str], dict[str, str], dict[str, dict[str, Any]]]


def snapshot(jobs: Jobs, flights: list[InFlight]) -> Snapshot:
    statuses = {f.name: f.jobs.status(f.name) for f in flights}
    return uids(jobs.pods()), uids(jobs.services()), statuses


def conditions(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["lastTransitionTime"]) for c in status["conditions"]]


def run_jobs_under(jobs: Jobs, kubelet: FakeKubelet) -> list[InFlight]:
    """Create one job of every kind; once their pods exist, the kubelet runs them;
    wait until each is Running."""
    flights = [_job_of(jobs, kind) for kind in KINDS]
    every = {pod for f in flights for pod in f.pods}
    wait_for(lambda: every <= set(jobs.pods()), 30, message=f"the pods {sorted(every)}")
    for pod in sorted(every):
        kubelet.run(jobs.namespace, pod)
    for flight in flights:
        flight.jobs.wait_condition(flight.name, c.RUNNING, timeout=30)
    return flights


def check_adopted(jobs: Jobs, flights: list[InFlight], before: Snapshot) -> None:
    pods, services, statuses = before
    time.sleep(SETTLE)
    now_pods, now_services, now_statuses = snapshot(jobs, flights)
    assert now_pods == pods, "a pod was deleted or created"
    assert now_services == services, "a service was deleted or created"
    for name, status in statuses.items():
        assert now_statuses[name]["startTime"] == status["startTime"], name
        kept = conditions(status)
        assert conditions(now_statuses[name])[: len(kept)] == kept, name  # not restarted


def finish(jobs: Jobs, kubelet: FakeKubelet, flights: list[InFlight], before: Snapshot) -> None:
    for flight in flights:
        for pod in flight.pods:
            kubelet.succeed(jobs.namespace, pod, container=flight.kind.container_name)
    for flight in flights:
        done = flight.jobs.wait_condition(flight.name, c.SUCCEEDED, timeout=30)
        assert done["reason"] == flight.kind.reason("Succeeded")
    assert uids(jobs.services()) == before[1]
    for name, uid in uids(jobs.pods()).items():  # cleanPodPolicy may delete, not recreate
        assert before[0][name] == uid


def test_tfjob_adopts_jobs_kubeflow_started(
    kubeflow: Kubeflow, operators: Operators, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    upstream = kubeflow.start()
    flights = run_jobs_under(jobs, kubelet)
    before = snapshot(jobs, flights)
    stop(upstream)  # its reconciles are over (its own exit code: see training_operator.stop)
    assert upstream.process.returncode is not None

    tfjob = operators.start()
    for kind in KINDS:
        wait_for(
            lambda kind=kind: (
                tfjob.metric(
                    "controller_runtime_reconcile_total",
                    controller=kind.controller_name,
                    result="success",
                )
                >= 1
            ),
            message=f"tfjob's first reconcile of the {kind.kind}",
        )
    check_adopted(jobs, flights, before)
    assert tfjob.metric("created_pods_total") == 0
    assert tfjob.metric("succeeded_service_creation_total") == 0
    finish(jobs, kubelet, flights, before)


def test_kubeflow_adopts_jobs_tfjob_started(
    kubeflow: Kubeflow, operators: Operators, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    """The way back: Kubeflow's operator reads tfjob's objects and statuses as its own."""
    tfjob = operators.start()
    flights = run_jobs_under(jobs, kubelet)
    before = snapshot(jobs, flights)
    assert tfjob.stop() == 0

    kubeflow.start()
    check_adopted(jobs, flights, before)
    finish(jobs, kubelet, flights, before)
