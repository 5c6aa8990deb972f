"""Kubeflow Trainer v2.3.0, the reference operator for TrainJob, runs end to end here.

The whole chain a real cluster runs, each link the real program: Trainer makes the
JobSet of a TrainJob, JobSet makes its Jobs, kube-controller-manager's Job controller
makes their pods, the scheduler binds them to kwok nodes, kwok runs and ends them
(the exit code comes from the kwok annotations the TrainJob's runtime patch puts on
the pod template), and the outcome climbs back to the TrainJob's conditions. The
parity tests compare tfjob's TrainJobs with what this reference makes.
"""

from __future__ import annotations

import copy
from typing import Any

from testkit.cluster import Nodes
from testkit.trainer import TrainerManager
from testkit.trainjobs import TrainJobs, ending, trainjob

#: The annotation of an Indexed Job's pod that holds its completion index.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _env(pod: dict[str, Any], container: str = "node") -> dict[str, Any]:
    for entry in pod["spec"]["containers"]:
        if entry["name"] == container:
            return {var["name"]: var for var in entry.get("env") or []}
    raise AssertionError(f"no container {container} in pod {pod['metadata']['name']}")


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            found: dict[str, Any] = entry
            return found
    return None


def test_torch_trainjob_of_two_nodes_completes(
    trainer: TrainerManager, trainjobs: TrainJobs, nodes: Nodes
) -> None:
    nodes.add(1)
    trainjobs.create(trainjob("torch", num_nodes=2, patches=[ending(0)]))

    finished = trainjobs.wait_finished("torch")
    assert (finished["type"], finished["reason"]) == ("Complete", "AllJobsCompleted"), finished
    assert trainjobs.condition("torch", "Failed") is None

    # Trainer's JobSet, owned by the TrainJob, completed by JobSet.
    jobset = trainjobs.jobset("torch")
    assert jobset is not None
    owner = jobset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "torch", True)
    assert _condition(jobset, "Completed")["status"] == "True"  # type: ignore[index]

    # numNodes became the trainer Job's parallelism; JobSet's webhook made it Indexed.
    (job,) = trainjobs.jobs("torch")
    assert job["metadata"]["name"] == "torch-node-0"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 2
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["status"]["succeeded"] == 2

    # Two pods on the kwok node, one per completion index, each ended Succeeded and
    # told its rank through the torch environment.
    pods = trainjobs.pods("torch")
    assert len(pods) == 2
    assert {p["metadata"]["annotations"][COMPLETION_INDEX] for p in pods} == {"0", "1"}
    for pod in pods:
        assert pod["spec"]["nodeName"] in nodes.names
        assert pod["status"]["phase"] == "Succeeded"
        env = _env(pod)
        assert env["PET_NNODES"]["value"] == "2"
        assert env["PET_MASTER_ADDR"]["value"] == "torch-node-0-0.torch"
        rank = env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert rank == f"metadata.annotations['{COMPLETION_INDEX}']"

    # The TrainJob's status mirrors the JobSet's replicated Jobs.
    (status,) = trainjobs.get("torch")["status"]["jobsStatus"]
    assert status["name"] == "node"
    assert status["succeeded"] == 1


def test_failing_trainjob_fails(
    trainer: TrainerManager, trainjobs: TrainJobs, nodes: Nodes
) -> None:
    """A pod that exits 1 fails its Job (no retries in this runtime), the JobSet and
    then the TrainJob."""
    runtime = copy.deepcopy(trainer.runtime("torch-distributed"))
    runtime["kind"] = "TrainingRuntime"
    labels = runtime["metadata"].get("labels") or {}
    runtime["metadata"] = {"name": "torch-fail-fast", "namespace": trainjobs.namespace,
                           "labels": labels}  # fmt: skip
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    trainjobs.create_runtime(runtime)
    nodes.add(1)
    trainjobs.create(
        trainjob("broken", "torch-fail-fast", kind="TrainingRuntime", num_nodes=2,
                 patches=[ending(1)])
    )  # fmt: skip

    finished = trainjobs.wait_finished("broken")
    assert (finished["type"], finished["reason"]) == ("Failed", "FailedJobs"), finished
    assert trainjobs.condition("broken", "Complete") is None
    jobset = trainjobs.jobset("broken")
    assert jobset is not None
    assert _condition(jobset, "Failed")["status"] == "True"  # type: ignore[index]
    (job,) = trainjobs.jobs("broken")
    assert _condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert any(p["status"]["phase"] == "Failed" for p in trainjobs.pods("broken"))
