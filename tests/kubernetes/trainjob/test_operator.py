"""tfjob's operator serves TrainJobs end to end, with the real JobSet controller.

The chain of test_reference.py with tfjob in Trainer's place: ``tfjob operator``
(as its ServiceAccount, with manifests/base's RBAC) makes the JobSet of a TrainJob
from a runtime Trainer ships, JobSet makes its Jobs, the Job controller their pods,
kwok runs and ends them, and tfjob reads the outcome back into the TrainJob's
conditions. Trainer's own controller does not run here (its module-scoped fixture
is not used), so nothing else reconciles these TrainJobs.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.operators import Operators, RunningOperator
from testkit.trainjobs import TrainJobs, ending, trainjob

TORCH = "torch-distributed"


@pytest.fixture
def tfjob_operator(
    trainer_api: list[dict[str, Any]], operators: Operators
) -> Iterator[RunningOperator]:
    yield operators.start("--enable-scheme=trainjob")


@pytest.mark.usefixtures("tfjob_operator")
def test_a_torch_trainjob_runs_to_complete(trainjobs: TrainJobs, nodes: Nodes) -> None:
    nodes.add(1)
    trainjobs.create(trainjob("torch", TORCH, num_nodes=2, patches=[ending(0)]))
    finished = trainjobs.wait_finished("torch", timeout=60)
    assert (finished["type"], finished["reason"]) == ("Complete", "AllJobsCompleted"), finished
    jobset = trainjobs.jobset("torch")
    assert jobset is not None
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "torch", True)
    managers = {m["manager"] for m in jobset["metadata"]["managedFields"]}
    assert "trainer" in managers  # applied as Trainer applies it
    (job,) = trainjobs.jobs("torch")
    assert job["spec"]["parallelism"] == 2
    status = trainjobs.get("torch")["status"]
    assert [j["name"] for j in status["jobsStatus"]] == ["node"]


@pytest.mark.usefixtures("tfjob_operator")
def test_a_failing_trainjob_fails(
    trainer_api: list[dict[str, Any]], trainjobs: TrainJobs, nodes: Nodes
) -> None:
    """A pod that exits 1 fails its Job (no retries in this namespaced copy of the
    torch runtime), the JobSet and then the TrainJob."""
    (shipped,) = [r for r in trainer_api if r["metadata"]["name"] == TORCH]
    runtime = copy.deepcopy(shipped)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": "torch-fail-fast", "namespace": trainjobs.namespace}
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    trainjobs.create_runtime(runtime)
    nodes.add(1)
    manifest = trainjob("broken", "torch-fail-fast", kind="TrainingRuntime", num_nodes=2)
    manifest["spec"]["runtimePatches"] = [ending(1)]
    trainjobs.create(manifest)
    finished = trainjobs.wait_finished("broken", timeout=60)
    assert (finished["type"], finished["reason"]) == ("Failed", "FailedJobs"), finished
    assert trainjobs.condition("broken", "Complete") is None
    jobset = trainjobs.jobset("broken")
    assert jobset is not None and _condition(jobset, "Failed")["status"] == "True"  # type: ignore[index]


@pytest.mark.usefixtures("tfjob_operator")
def test_suspend_then_resume(trainjobs: TrainJobs, nodes: Nodes) -> None:
    nodes.add(1)
    manifest = trainjob("paused", TORCH, num_nodes=1, patches=[ending(0, "1s")])
    manifest["spec"]["suspend"] = True
    trainjobs.create(manifest)
    trainjobs.wait_condition("paused", "Suspended")
    jobset = wait_for(lambda: trainjobs.jobset("paused"), 30, message="the suspended JobSet")
    assert jobset["spec"]["suspend"] is True
    time.sleep(1.0)
    assert trainjobs.pods("paused") == []
    _patch(trainjobs, "paused", {"spec": {"suspend": False}})
    finished = trainjobs.wait_finished("paused", timeout=60)
    assert finished["type"] == "Complete", finished
    suspended = _condition(trainjobs.get("paused"), "Suspended")
    assert suspended is not None and (suspended["status"], suspended["reason"]) == (
        "False",
        "Resumed",
    )


@pytest.mark.usefixtures("tfjob_operator")
def test_the_active_deadline_fails_and_deletes_the_jobset(
    trainjobs: TrainJobs, nodes: Nodes
) -> None:
    nodes.add(1)
    manifest = trainjob("late", TORCH, num_nodes=1, patches=[ending(0, "10m")])
    manifest["spec"]["activeDeadlineSeconds"] = 3
    trainjobs.create(manifest)
    wait_for(lambda: trainjobs.jobset("late"), 30, message="the JobSet")
    failed = trainjobs.wait_condition("late", "Failed", timeout=30)
    assert failed["reason"] == "DeadlineExceeded", failed
    wait_for(lambda: trainjobs.jobset("late") is None, 30, message="the JobSet deleted")


def _patch(trainjobs: TrainJobs, name: str, patch: dict[str, Any]) -> None:
    status, body = trainjobs.plane.request(
        "PATCH",
        f"{trainjobs.path}/{name}",
        body=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, f"patch TrainJob {name}: {status} {body}"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            found: dict[str, Any] = entry
            return found
    return None
