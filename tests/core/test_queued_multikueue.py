"""MultiKueue with tfjob as the kinds' job framework (`--kueue-integration=external`):
one reconcile of a job on each side, as Kueue v0.19.0's job framework would have it.

On the manager cluster a job with `spec.managedBy: kueue.x-k8s.io/multikueue` gets its
Workload and its suspend, nothing else: it runs on a worker. The worker's copy of it
names a Workload the manager's MultiKueue made beforehand (the prebuilt-workload-name
annotation), which it takes and runs under, never making one of its own.
"""

from __future__ import annotations

import copy
from typing import Any

from testkit.builders import NOW, actions_of, pods
from tests.core.test_queued_reconcile import (
    EXTERNAL,
    QUEUE,
    admitted,
    condition,
    conditions_of,
    created_workload,
    events,
    plan_of,
    stored,
    workload_status,
)
from tfjob.api.observed import OwnedObject
from tfjob.api.types import Job
from tfjob.core import queued
from tfjob.core.plan import (
    CreateGroup,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeletePod,
    SetSuspend,
    UpdateGroup,
    UpdateGroupStatus,
)
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.tensorflow import TFJob

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
#: The name the manager's Workload has (made there, for the manager's job's UID).
MANAGERS_WORKLOAD = "tfjob-test-tfjob-1a2b3"


def job(
    *,
    managed_by: str | None = None,
    suspend: bool | None = None,
    workers: int = 2,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> Job:
    """TFJob `test-tfjob` of `workers` Workers queued in `training`."""
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf:1"}]}}
    spec: dict[str, Any] = {
        "tfReplicaSpecs": {"Worker": {"replicas": workers, "template": template}}
    }
    if managed_by is not None:
        spec["managedBy"] = managed_by
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend}
    document: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": "test-tfjob",
            "namespace": "default",
            "uid": "uid-1",
            "labels": QUEUE if labels is None else labels,
            "annotations": annotations or {},
        },
        "spec": spec,
    }
    if status is not None:
        document["status"] = status
    return decode_job(document, TFJob)


def copy_on_worker(**kwargs: Any) -> Job:
    """The worker's copy as MultiKueue creates it: no spec.managedBy, suspended as the
    manager's job was, labelled with its origin, naming the manager's Workload."""
    labels = {**QUEUE, ORIGIN: "multikueue"}
    return job(labels=labels, annotations={PREBUILT: MANAGERS_WORKLOAD}, **kwargs)


def prebuilt(*, workers: int = 2) -> dict[str, Any]:
    """The Workload the manager's MultiKueue makes on the worker: the manager's own,
    renamed, with no owner, finalizer or job-uid label, and the origin label."""
    manifest = copy.deepcopy(created_workload(job(workers=workers)))
    meta = manifest["metadata"]
    meta["name"] = MANAGERS_WORKLOAD
    meta.pop("ownerReferences")
    meta.pop("finalizers")
    meta["labels"] = {ORIGIN: "multikueue"}
    return manifest


def taken(manifest: dict[str, Any]) -> dict[str, Any]:
    """The prebuilt Workload once the worker's job has taken it."""
    out = copy.deepcopy(manifest)
    owner = created_workload(job())["metadata"]["ownerReferences"]
    out["metadata"]["ownerReferences"] = owner
    out["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] = "uid-1"
    return out


# -- the manager -------------------------------------------------------------------


def test_a_multikueue_job_on_the_manager_gets_its_workload_but_no_pods_and_no_status() -> None:
    new = job(managed_by=MULTIKUEUE)
    plan = plan_of(new)
    assert plan.actions[0] == SetSuspend(value=True)
    [create] = actions_of(plan, CreateGroup)
    assert create.manifest["spec"]["queueName"] == "training"
    assert len(plan.actions) == 2
    assert not plan.status_changed and plan.status.conditions == []
    assert "CreatedWorkload" in [reason for reason, _ in events(plan)]

    waiting = job(managed_by=MULTIKUEUE, suspend=True)
    again = plan_of(waiting, workloads=[stored(created_workload(waiting))])
    assert not actions_of(again, CreateGroup) and not actions_of(again, SetSuspend)
    assert not again.status_changed


def test_a_multikueue_job_admitted_on_the_manager_is_started_yet_gets_no_pod() -> None:
    waiting = job(managed_by=MULTIKUEUE, suspend=True)
    plan = plan_of(waiting, workloads=[admitted(created_workload(waiting))])
    assert plan.actions[0] == SetSuspend(value=False)
    assert not actions_of(plan, CreatePod) and not actions_of(plan, CreateService)
    assert not plan.status_changed
    assert ("Started", "Admitted by clusterQueue cq-a") in events(plan)

    # Evicted there (the worker lost, the check retried): it is suspended again.
    running = job(managed_by=MULTIKUEUE, suspend=False)
    evicted = admitted(created_workload(running), condition("Evicted", reason="AdmissionCheck"))
    stopped = plan_of(running, workloads=[evicted])
    assert stopped.actions[0] == SetSuspend(value=True)
    assert not stopped.status_changed


def test_a_multikueue_jobs_status_copied_from_the_worker_finishes_its_workload() -> None:
    worker_status = {"conditions": [condition("Created"), condition("Succeeded", message="ok")]}
    done = job(managed_by=MULTIKUEUE, suspend=False, status=worker_status)
    plan = plan_of(done, workloads=[admitted(created_workload(done))])
    assert conditions_of(workload_status(plan))["Finished"] == ("True", "Succeeded")
    assert not plan.status_changed  # no completionTime, no cleanup of the worker's status
    assert [type(a) for a in plan.actions] == [UpdateGroupStatus]


def test_other_controllers_and_builtin_mode_leave_the_job_alone_entirely() -> None:
    handed = job(managed_by=MULTIKUEUE)
    workload = admitted(created_workload(handed))
    cases = [
        (handed, Settings()),  # builtin: Kueue's own integration has it
        (job(managed_by="example.com/other"), EXTERNAL),
        (job(managed_by=MULTIKUEUE, labels={}), EXTERNAL),  # no queue: no dispatch
    ]
    for alone, settings in cases:
        plan = reconcile(alone, pods("worker", 2), [], NOW, settings, workloads=[workload])
        assert plan.actions == [] and plan.events == [], alone.spec.managed_by
        assert not plan.status_changed
    ours = plan_of(job(managed_by="kubeflow.org/training-operator", labels={}))
    assert len(actions_of(ours, CreatePod)) == 2


# -- the worker ----------------------------------------------------------------------


def test_the_workers_copy_waits_for_its_prebuilt_workload_and_never_makes_one() -> None:
    plan = plan_of(copy_on_worker(suspend=True))
    assert not actions_of(plan, CreateGroup) and not actions_of(plan, CreatePod)
    assert plan.requeue_after == queued.PREBUILT_RECHECK_SECONDS
    # Running without it (say it was deleted): stopped, as Kueue stops it.
    running = copy_on_worker(suspend=False)
    stopped = plan_of(running, pods("worker", 2))
    assert stopped.actions[0] == SetSuspend(value=True)
    assert len(actions_of(stopped, DeletePod)) == 2
    assert ("Stopped", "missing workload") in events(stopped)
    assert not actions_of(stopped, CreateGroup)


def test_the_workers_copy_takes_its_prebuilt_workload_and_no_other() -> None:
    worker_job = copy_on_worker(suspend=True)
    own = stored(created_workload(worker_job))  # one it would have made: left alone
    plan = plan_of(worker_job, workloads=[OwnedObject.of(prebuilt()), own])
    [take] = [a for a in actions_of(plan, UpdateGroup) if a.name == MANAGERS_WORKLOAD]
    meta = take.manifest["metadata"]
    [owner] = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("TFJob", "test-tfjob", "uid-1")
    assert owner["controller"] is True
    assert meta["labels"] == {ORIGIN: "multikueue", "kueue.x-k8s.io/job-uid": "uid-1"}
    assert take.manifest["spec"] == prebuilt()["spec"]
    assert not actions_of(plan, CreateGroup) and not actions_of(plan, DeleteGroup)
    assert not actions_of(plan, SetSuspend) and not actions_of(plan, CreatePod)


def test_the_workers_copy_runs_once_its_prebuilt_workload_is_admitted() -> None:
    worker_job = copy_on_worker(suspend=True)
    plan = plan_of(worker_job, workloads=[admitted(taken(prebuilt()))])
    assert plan.actions[0] == SetSuspend(value=False)
    assert len(actions_of(plan, CreatePod)) == 2
    assert not actions_of(plan, CreateGroup)
    # As the label (Kueue without WorkloadIdentifierAnnotations) the same.
    labelled = job(labels={**QUEUE, PREBUILT: MANAGERS_WORKLOAD}, suspend=True)
    assert plan_of(labelled, workloads=[admitted(taken(prebuilt()))]).actions == plan.actions


def test_a_prebuilt_workload_of_another_job_or_out_of_sync_is_not_run() -> None:
    worker_job = copy_on_worker(suspend=True)
    others = taken(prebuilt())
    others["metadata"]["ownerReferences"][0]["uid"] = "uid-other"
    plan = plan_of(worker_job, workloads=[admitted(others)])
    assert not actions_of(plan, UpdateGroup) and not actions_of(plan, UpdateGroupStatus)
    assert not actions_of(plan, CreatePod) and not actions_of(plan, CreateGroup)

    # The copy asks 3 Workers, the Workload 2: finished OutOfSync (the manager then
    # dispatches again), and the job stays suspended.
    bigger = copy_on_worker(suspend=True, workers=3)
    stale = admitted(taken(prebuilt()))
    plan = plan_of(bigger, workloads=[stale])
    assert conditions_of(workload_status(plan))["Finished"] == ("True", "OutOfSync")
    assert not actions_of(plan, SetSuspend) and not actions_of(plan, CreatePod)
    assert not actions_of(plan, CreateGroup)
