"""Swapping Kubeflow's training-operator (v1.9.4, the real binary) for tfjob in the
middle of a running job, and back: the new operator adopts the job as it is.

"Adopts" means, as a user would check: not one pod or service is deleted or created
again (same names and UIDs, nothing extra), the status goes on from where the other
operator left it (same Created/Running conditions and startTime), and the job then
reaches Succeeded when its pods finish. docs/migrate.md is the user's side of this.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators, RunningOperator, replica
from testkit.training_operator import Kubeflow, stop

WORKERS = {"swap-worker-0", "swap-worker-1"}
SPECS = {"Worker": replica(2, restart_policy="OnFailure")}
SETTLE = 2.0  # a few reconciles' time for anything wrong to show up


@pytest.fixture
def kubeflow(
    kube: Client, kubeconfig: Path, namespace: str, crd_installed: Any, tmp_path: Path
) -> Iterator[Kubeflow]:
    runner = Kubeflow(kube, kubeconfig, namespace, tmp_path)
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


def snapshot(jobs: Jobs) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    return uids(jobs.pods()), uids(jobs.services()), jobs.status("swap")


def conditions(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["lastTransitionTime"]) for c in status["conditions"]]


def run_job_under(jobs: Jobs, kubelet: FakeKubelet) -> None:
    """Create the job; once its pods exist, the kubelet runs them; wait for Running."""
    jobs.create("swap", SPECS)
    jobs.wait_pods(WORKERS, timeout=30)
    jobs.wait_services(WORKERS, timeout=30)
    for pod in sorted(WORKERS):
        kubelet.run(jobs.namespace, pod)
    jobs.wait_condition("swap", "Running", timeout=30)


def check_adopted(
    jobs: Jobs, before: tuple[dict[str, str], dict[str, str], dict[str, Any]]
) -> None:
    pods, services, status = before
    time.sleep(SETTLE)
    now_pods, now_services, now_status = snapshot(jobs)
    assert now_pods == pods, "a pod was deleted or created"
    assert now_services == services, "a service was deleted or created"
    assert now_status["startTime"] == status["startTime"]
    kept = conditions(status)
    assert conditions(now_status)[: len(kept)] == kept  # continued, not restarted


def finish(jobs: Jobs, kubelet: FakeKubelet, before: tuple[dict[str, str], ...]) -> None:
    for pod in sorted(WORKERS):
        kubelet.succeed(jobs.namespace, pod)
    done = jobs.wait_condition("swap", "Succeeded", timeout=30)
    assert done["reason"] == "TFJobSucceeded"
    assert uids(jobs.services()) == before[1]
    for name, uid in uids(jobs.pods()).items():  # cleanPodPolicy may delete, not recreate
        assert before[0][name] == uid


def test_tfjob_adopts_a_job_kubeflow_started(
    kubeflow: Kubeflow, operators: Operators, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    upstream = kubeflow.start()
    run_job_under(jobs, kubelet)
    before = snapshot(jobs)
    stop(upstream)  # its reconciles are over (its own exit code: see training_operator.stop)
    assert upstream.process.returncode is not None

    tfjob = operators.start()
    wait_for(
        lambda: (
            tfjob.metric(
                "controller_runtime_reconcile_total",
                controller="tfjob-controller",
                result="success",
            )
            >= 1
        ),
        message="tfjob's first reconcile of the job",
    )
    check_adopted(jobs, before)
    assert tfjob.metric("created_pods_total") == 0
    assert tfjob.metric("succeeded_service_creation_total") == 0
    finish(jobs, kubelet, before)


def test_kubeflow_adopts_a_job_tfjob_started(
    kubeflow: Kubeflow, operators: Operators, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    """The way back: Kubeflow's operator reads tfjob's objects and status as its own."""
    tfjob = operators.start()
    run_job_under(jobs, kubelet)
    before = snapshot(jobs)
    assert tfjob.stop() == 0

    kubeflow.start()
    check_adopted(jobs, before)
    finish(jobs, kubelet, before)
