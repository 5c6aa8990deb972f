"""Kueue's TrainJob integration queues the TrainJobs tfjob's operator serves.

Kueue v0.19.0 manages ``trainer.kubeflow.org/v1alpha1`` TrainJobs itself
(``trainer.kubeflow.org/trainjob``): its webhook suspends a queued TrainJob at
creation and gives it an empty runtime patch of its own (manager
``kueue.x-k8s.io/manager``); to admit it, it writes the flavour's node selector and
tolerations into that patch (one replicated job per pod set) while the TrainJob is
suspended, then unsuspends it; to evict it, it suspends the TrainJob, waits until
the TrainJob's ``status.jobsStatus`` counts no active job, and empties its patch.
Kubeflow Trainer's controller does not run here: tfjob's operator makes the JobSet
(suspended while the TrainJob is, with the patches merged into its templates) and
copies the JobSet's status back; the real JobSet controller resumes its Jobs with
the admitted pod templates; kwok runs the pods.

One Kueue for the file (the ``kueue`` fixture, with ``KUEUE_KINDS``), the session's
JobSet manager (testkit/trainjob_fixtures.py), one operator per test.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.controlplane import ControlPlane
from testkit.helpers import wait_for
from testkit.jobset import JobSetManager
from testkit.kueue import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    TRAINJOB,
    Kueue,
    QueuedJobs,
    Queues,
    workload_condition,
)
from testkit.operators import Operators
from testkit.trainjob_fixtures import jobset, trainer_api
from testkit.trainjobs import TrainJobs, ending, trainjob

KUEUE_KINDS = (TRAINJOB,)
TORCH = "torch-distributed"
KUEUE_PATCH = "kueue.x-k8s.io/manager"
__all__ = ["jobset", "trainer_api"]  # shared fixtures (testkit/trainjob_fixtures.py)

POOL_LABEL = "tfjob.test/pool"
POOL_TAINT = "tfjob.test/reserved"
TOLERATION = {"key": POOL_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@pytest.fixture
def trainjobs(jobset: JobSetManager, control_plane: ControlPlane, namespace: str) -> TrainJobs:
    return TrainJobs(control_plane, namespace)


@pytest.fixture
def workloads(queues: Queues, control_plane: ControlPlane, namespace: str) -> QueuedJobs:
    """Kueue's Workloads of the test's TrainJobs (found by their owner's kind)."""
    return QueuedJobs(control_plane, namespace, TRAINJOB)


@pytest.fixture
def pool(nodes: Nodes, queues: Queues) -> str:
    """A tainted node labelled for the tests' flavour and a roomy plain node: a pod
    lands on the pool node only with the flavour's node selector and toleration."""
    taint = {"key": POOL_TAINT, "value": "true", "effect": "NoSchedule"}
    (node,) = nodes.add(1, cpu="4", labels={POOL_LABEL: "a"}, taints=[taint])
    nodes.add(1, cpu="8")
    return node


def _queued(name: str, queue: str, *, run_for: str, priority: str | None = None) -> dict[str, Any]:
    """Two nodes of one CPU each, every pod ending `run_for` after it starts."""
    manifest = trainjob(name, TORCH, num_nodes=2, patches=[ending(0, run_for)])
    manifest["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
    labels = {QUEUE_LABEL: queue}
    if priority:
        labels[PRIORITY_LABEL] = priority
    manifest["metadata"]["labels"] = labels
    return manifest


def _suspended(trainjobs: TrainJobs, name: str) -> bool:
    return bool(trainjobs.get(name)["spec"].get("suspend"))


def _running(trainjobs: TrainJobs, name: str, count: int = 2) -> list[dict[str, Any]]:
    def running() -> list[dict[str, Any]] | None:
        pods = [p for p in trainjobs.pods(name) if not p["metadata"].get("deletionTimestamp")]
        ok = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count and len(ok) == count else None

    return wait_for(running, 30, interval=0.1, message=f"{count} Running pods of {name}")


def _kueue_patch(trainjobs: TrainJobs, name: str) -> dict[str, Any]:
    (patch,) = [
        p for p in trainjobs.get(name)["spec"]["runtimePatches"] if p["manager"] == KUEUE_PATCH
    ]
    spec: dict[str, Any] = patch["trainingRuntimeSpec"]["template"]["spec"]
    return spec


def _placed_by_the_flavour(pods: list[dict[str, Any]], node: str) -> None:
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"] == {POOL_LABEL: "a"}, name
        assert TOLERATION in pod["spec"]["tolerations"], name
        assert pod["spec"]["nodeName"] == node, name


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None
    )


def test_quota_holds_a_trainjob_and_admission_places_its_pods_by_the_flavour(
    trainjobs: TrainJobs,
    workloads: QueuedJobs,
    queues: Queues,
    operators: Operators,
    pool: str,
) -> None:
    flavor = queues.flavor("pool", nodeLabels={POOL_LABEL: "a"}, tolerations=[TOLERATION])
    queue = queues.queue(cpu="2", flavor=flavor)
    operators.start("--enable-scheme=trainjob")

    trainjobs.create(_queued("first", queue, run_for="5s"))
    _placed_by_the_flavour(_running(trainjobs, "first"), pool)
    (admitted,) = _kueue_patch(trainjobs, "first")["replicatedJobs"]
    assert admitted["name"] == "node", admitted
    trainjobs.create(_queued("second", queue, run_for="1s"))
    verdict = wait_for(
        lambda: workloads.pending_for_quota("second"), message="Kueue to hold the second"
    )
    assert "insufficient" in verdict["message"], verdict
    assert _suspended(trainjobs, "second")
    assert trainjobs.wait_condition("second", "Suspended")["reason"] == "Suspended"
    second = trainjobs.jobset("second")
    assert second is None or second["spec"]["suspend"] is True, second
    assert trainjobs.pods("second") == []

    assert trainjobs.wait_finished("first", timeout=30)["type"] == "Complete"
    wait_for(lambda: not _suspended(trainjobs, "second"), message="Kueue to admit the second")
    assert trainjobs.wait_finished("second", timeout=30)["type"] == "Complete"
    _placed_by_the_flavour(trainjobs.pods("second"), pool)
    # Kueue marks the Workload Finished after it sees the TrainJob's Complete condition.
    finished = wait_for(
        lambda: workload_condition(workloads.workload("second"), "Finished"),
        message="Kueue to mark the second's Workload Finished",
    )
    assert finished["status"] == "True", finished


def test_kueues_webhook_refuses_a_trainjob_whose_runtime_is_missing(
    trainjobs: TrainJobs, kueue: Kueue
) -> None:
    """Queued or not: Kueue builds every TrainJob's pod sets in its validating webhook
    (TopologyAwareScheduling, on by default), so the TrainJob never reaches tfjob,
    whose own answer would be a Failed condition (TrainingRuntimeNotFound)."""
    status, body = trainjobs.plane.request(
        "POST", trainjobs.path, body=trainjob("orphan", "no-such-runtime", num_nodes=1)
    )
    assert status == 403, body
    assert "runtime 'no-such-runtime' not found" in body["message"], body


def test_a_higher_priority_trainjob_preempts_a_lower_one_which_resumes_later(
    trainjobs: TrainJobs,
    workloads: QueuedJobs,
    queues: Queues,
    operators: Operators,
    pool: str,
) -> None:
    flavor = queues.flavor("pool", nodeLabels={POOL_LABEL: "a"}, tolerations=[TOLERATION])
    low = queues.priority_class("low", 100)
    high = queues.priority_class("high", 1000)
    queue = queues.queue(cpu="2", flavor=flavor, preemption={"withinClusterQueue": "LowerPriority"})
    operators.start("--enable-scheme=trainjob")

    trainjobs.create(_queued("low", queue, run_for="5s", priority=low))
    _running(trainjobs, "low")
    trainjobs.create(_queued("high", queue, run_for="2s", priority=high))
    wait_for(lambda: _suspended(trainjobs, "low"), message="Kueue to suspend low")
    low = wait_for(
        lambda: (js := trainjobs.jobset("low")) and js["spec"].get("suspend") and js,
        timeout=10,
        message="low's JobSet suspended",
    )
    assert low["spec"]["suspend"] is True
    wait_for(lambda: trainjobs.pods("low") == [], timeout=10, message="low's pods deleted")
    # Kueue frees the quota only once low's status counts no active job, and then
    # takes its admission back out of the patch.
    wait_for(
        lambda: not _kueue_patch(trainjobs, "low").get("replicatedJobs"),
        timeout=10,
        message="Kueue to empty low's patch",
    )
    evicted = workload_condition(workloads.workload("low"), "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted", evicted
    assert trainjobs.wait_condition("low", "Suspended")["reason"] == "Suspended"
    assert all(j["active"] == 0 for j in trainjobs.get("low")["status"]["jobsStatus"])

    _placed_by_the_flavour(_running(trainjobs, "high"), pool)
    assert trainjobs.wait_finished("high", timeout=30)["type"] == "Complete"
    wait_for(lambda: not _suspended(trainjobs, "low"), timeout=30, message="low re-admitted")
    _placed_by_the_flavour(_running(trainjobs, "low"), pool)
    assert trainjobs.wait_finished("low", timeout=30)["type"] == "Complete"
    resumed = _condition(trainjobs.get("low"), "Suspended")
    assert resumed is not None and (resumed["status"], resumed["reason"]) == ("False", "Resumed")
    assert _condition(trainjobs.get("low"), "Failed") is None
