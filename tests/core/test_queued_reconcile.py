"""One reconcile of a queued job when tfjob makes its Kueue Workload
(`--kueue-integration=external`, core/queued.py): what a user sees of the job, its pods
and its Workload, pass by pass, as Kueue v0.19.0's job framework would have it.

The Workloads fed back in are the one a first pass creates, stored with the status
Kueue's scheduler would give it (written out here: admitted, evicted, finished).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from testkit.builders import NOW, actions_of, pod, pods, services
from tfjob.api.observed import OwnedObject
from tfjob.api.types import Job
from tfjob.core import queued
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    CreateGroup,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeletePod,
    DeleteService,
    Plan,
    SetSuspend,
    UpdateGroup,
    UpdateGroupStatus,
)
from tfjob.core.queueing import (
    POD_PRIORITY_CLASS,
    WORKLOAD_PRIORITY_CLASS,
    Priority,
    workload_manifest,
)
from tfjob.core.queueing import PriorityClass as Class
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.pytorch import PyTorchJob
from tfjob.frameworks.tensorflow import TFJob

EXTERNAL = Settings(kueue_integration="external")
QUEUE = {"kueue.x-k8s.io/queue-name": "training"}
SPOT = {
    "metadata": {"name": "spot"},
    "spec": {
        "nodeLabels": {"pool": "spot"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
FLAVORS = {"spot": SPOT}
TRUE_SINCE = "2026-11-30T11:00:00Z"


def tfjob(
    *,
    labels: dict[str, str] | None = None,
    suspend: bool | None = None,
    status: dict[str, Any] | None = None,
    workers: int = 2,
    **template_spec: Any,
) -> Job:
    """A TFJob `test-tfjob` of `workers` Workers queued in `training`."""
    container = {"name": "tensorflow", "image": "tf:1"}
    template = {"spec": {"containers": [container], **template_spec}}
    worker = {"replicas": workers, "template": template}
    spec: dict[str, Any] = {"tfReplicaSpecs": {"Worker": worker}}
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
        },
        "spec": spec,
    }
    if status is not None:
        document["status"] = status
    return decode_job(document, TFJob)


def condition(
    kind: str, status: str = "True", reason: str = "", message: str = ""
) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason or kind,
        "message": message,
        "lastTransitionTime": TRUE_SINCE,
    }


RUNNING = {"conditions": [condition("Created"), condition("Running", reason="TFJobRunning")]}


def plan_of(job: Job, observed_pods: list[Any] | None = None, **inputs: Any) -> Plan:
    settings = inputs.pop("settings", EXTERNAL)
    observed_services = inputs.pop("services", [])
    return reconcile(
        job, observed_pods or [], observed_services, NOW, settings, flavors=FLAVORS, **inputs
    )


def created_workload(job: Job) -> dict[str, Any]:
    """The Workload tfjob makes for the job (what a first pass creates)."""
    return workload_manifest(job, priority=None)


def stored(manifest: dict[str, Any], *conditions: dict[str, Any], **status: Any) -> OwnedObject:
    """The Workload as the API server keeps it, with this status."""
    document = copy.deepcopy(manifest)
    document["metadata"].update(uid="wl-uid", resourceVersion="7", generation=1)
    document["status"] = {"conditions": list(conditions), **status}
    return OwnedObject.of(document, with_status=True)


def admitted(manifest: dict[str, Any], *extra: dict[str, Any], **assigned: int) -> OwnedObject:
    """Admitted in ClusterQueue cq-a, each podSet on flavor spot, `assigned` counts
    (default: each podSet's own)."""
    assignments = [
        {
            "name": ps["name"],
            "flavors": {"cpu": "spot"},
            "count": assigned.get(ps["name"], ps["count"]),
        }
        for ps in manifest["spec"]["podSets"]
    ]
    return stored(
        manifest,
        condition("QuotaReserved"),
        condition("Admitted"),
        *extra,
        admission={"clusterQueue": "cq-a", "podSetAssignments": assignments},
    )


def events(plan: Plan) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in plan.events]


def status_of(plan: Plan, kind: str) -> tuple[str, str] | None:
    found = next((x for x in plan.status.conditions if x.type == kind), None)
    return None if found is None else (found.status, found.reason)


def workload_status(plan: Plan) -> dict[str, Any]:
    [write] = actions_of(plan, UpdateGroupStatus)
    assert write.kind == queued.WORKLOAD
    status: dict[str, Any] = write.manifest["status"]
    return status


def conditions_of(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}


# -- waiting ---------------------------------------------------------------------------


def test_a_new_queued_job_is_suspended_gets_its_workload_and_no_pods() -> None:
    job = tfjob()  # runPolicy.suspend unset: Kueue's webhook would have set it
    plan = plan_of(job)
    assert plan.actions[0] == SetSuspend(value=True)
    [create] = actions_of(plan, CreateGroup)
    workload = create.manifest
    assert (workload["apiVersion"], workload["kind"]) == ("kueue.x-k8s.io/v1beta2", "Workload")
    assert workload["spec"]["queueName"] == "training"
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("worker", 2)]
    assert not actions_of(plan, CreatePod) and not actions_of(plan, CreateService)
    assert status_of(plan, "Suspended") == ("True", "TFJobSuspended")
    name = workload["metadata"]["name"]
    assert ("CreatedWorkload", f"Created Workload: default/{name}") in events(plan)
    assert "Stopped" not in [reason for reason, _ in events(plan)]  # new, not stopped


def test_a_queued_job_waits_suspended_and_never_gets_a_second_workload() -> None:
    job = tfjob(suspend=True)
    workload = stored(created_workload(job))
    plan = plan_of(job, workloads=[workload])
    assert not actions_of(plan, CreateGroup)
    assert not actions_of(plan, SetSuspend)
    assert not actions_of(plan, CreatePod)
    assert status_of(plan, "Suspended") == ("True", "TFJobSuspended")
    # Kueue's PodsReady=False (WaitForStart) is the only write to the Workload.
    assert conditions_of(workload_status(plan)) == {"PodsReady": ("False", "WaitForStart")}


def test_a_job_still_running_its_pods_gets_no_workload_until_they_are_gone() -> None:
    job = tfjob(status=RUNNING)
    plan = plan_of(job, pods("worker", 2))
    assert plan.actions[0] == SetSuspend(value=True)
    assert not actions_of(plan, CreateGroup)  # the quota would be counted twice
    assert len(actions_of(plan, DeletePod)) == 2
    assert ("Stopped", "Missing Workload") in events(plan)


def test_a_running_job_whose_workload_is_not_admitted_is_stopped() -> None:
    job = tfjob(suspend=False, status=RUNNING)
    workload = stored(created_workload(job), condition("QuotaReserved", "False"))
    plan = plan_of(job, pods("worker", 2), workloads=[workload])
    assert plan.actions[0] == SetSuspend(value=True)
    assert len(actions_of(plan, DeletePod)) == 2
    assert ("Stopped", "Not admitted by cluster queue") in events(plan)


def test_the_priority_class_to_look_up_and_a_missing_one_holds_the_workload_back() -> None:
    job = tfjob()
    assert queued.priority_to_resolve(job, Settings()) is None  # builtin: nothing to look up
    assert queued.priority_to_resolve(tfjob(labels={}), EXTERNAL) is None
    assert queued.priority_to_resolve(job, EXTERNAL) == Class(POD_PRIORITY_CLASS, "")
    high = tfjob(labels={**QUEUE, "kueue.x-k8s.io/priority-class": "high"})
    wanted = queued.priority_to_resolve(high, EXTERNAL)
    assert wanted == Class(WORKLOAD_PRIORITY_CLASS, "high")

    assert wanted is not None
    missing = plan_of(high, priority=queued.PriorityNotFound(wanted))
    assert not actions_of(missing, CreateGroup)
    assert missing.actions == [SetSuspend(value=True)]
    assert ("ErrWorkloadCompose", "WorkloadPriorityClass 'high' not found") in events(missing)
    assert missing.requeue_after == queued.PRIORITY_RECHECK_SECONDS

    found = plan_of(high, priority=Priority(WORKLOAD_PRIORITY_CLASS, "high", 1000))
    [create] = actions_of(found, CreateGroup)
    assert create.manifest["spec"]["priority"] == 1000


# -- admitted --------------------------------------------------------------------------


def test_an_admitted_job_starts_on_its_flavors_nodes() -> None:
    waiting = tfjob(suspend=True)
    held = plan_of(waiting, workloads=[stored(created_workload(waiting))])
    job = msgspec.structs.replace(waiting, status=held.status)  # Suspended, as stored
    before = copy.deepcopy(job)
    workload = admitted(created_workload(job))
    plan = plan_of(job, workloads=[workload])
    assert plan.actions[0] == SetSuspend(value=False)
    creates = actions_of(plan, CreatePod)
    assert [a.name for a in creates] == ["test-tfjob-worker-0", "test-tfjob-worker-1"]
    assert len(actions_of(plan, CreateService)) == 2
    assert ("Started", "Admitted by clusterQueue cq-a") in events(plan)
    assert status_of(plan, "Suspended") == ("False", "TFJobResumed")

    renderer = PodRenderer(job, EXTERNAL, plan.replica_specs)
    pod_ = renderer.manifest(creates[1])
    assert pod_["spec"]["nodeSelector"] == {"pool": "spot"}
    assert pod_["spec"]["tolerations"] == SPOT["spec"]["tolerations"]
    labels, notes = pod_["metadata"]["labels"], pod_["metadata"]["annotations"]
    assert labels["kueue.x-k8s.io/podset"] == "worker"
    assert labels["kueue.x-k8s.io/local-queue-name"] == "training"
    assert labels["kueue.x-k8s.io/cluster-queue-name"] == "cq-a"
    assert labels["training.kubeflow.org/replica-index"] == "1"  # the operator's own stay
    assert notes["kueue.x-k8s.io/workload"] == workload.metadata.name
    assert job == before  # the stored job's templates are not touched

    # Once the runtime carried the plan out, the job runs as admitted: a pod made
    # again is placed alike.
    running = tfjob(suspend=False, status=msgspec.to_builtins(plan.status))
    again = plan_of(running, [pod("worker", 0)], workloads=[workload])
    assert [a.name for a in actions_of(again, CreatePod)] == ["test-tfjob-worker-1"]
    assert not actions_of(again, SetSuspend)
    assert "Started" not in [reason for reason, _ in events(again)]
    recreated = PodRenderer(running, EXTERNAL, again.replica_specs).manifest(
        actions_of(again, CreatePod)[0]
    )
    assert recreated["spec"]["nodeSelector"] == {"pool": "spot"}


def test_an_admission_naming_a_flavor_not_yet_seen_waits() -> None:
    job = tfjob(suspend=True)
    workload = admitted(created_workload(job))
    plan = reconcile(job, [], [], NOW, EXTERNAL, workloads=[workload], flavors={})
    assert not actions_of(plan, SetSuspend) and not actions_of(plan, CreatePod)
    assert plan.requeue_after == queued.FLAVOR_RECHECK_SECONDS


def test_an_admission_the_pods_cannot_carry_finishes_the_workload_and_the_job_waits() -> None:
    job = tfjob(suspend=True, nodeSelector={"pool": "on-demand"})  # the flavor says spot
    plan = plan_of(job, workloads=[admitted(created_workload(job))])
    assert not actions_of(plan, SetSuspend) and not actions_of(plan, CreatePod)
    assert conditions_of(workload_status(plan))["Finished"] == ("True", "FailedToStart")
    [warning] = [e for e in plan.events if e.reason == "FailedToStart"]
    assert "nodeSelector key 'pool'" in warning.message
    assert status_of(plan, "Suspended") == ("True", "TFJobSuspended")


def test_an_elastic_pytorchjob_admitted_in_part_runs_the_workers_admitted() -> None:
    container = {"name": "pytorch", "image": "torch:1"}
    template = {"spec": {"containers": [container]}}
    job = decode_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "ns", "uid": "uid-pt", "labels": QUEUE},
            "spec": {
                "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4},
                "runPolicy": {"suspend": True},
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template},
                    "Worker": {"replicas": 4, "template": template},
                },
            },
        },
        PyTorchJob,
    )
    [create] = actions_of(plan_of(job), CreateGroup)
    worker_set = create.manifest["spec"]["podSets"][1]
    assert (worker_set["name"], worker_set["count"], worker_set["minCount"]) == ("worker", 4, 2)

    plan = plan_of(job, workloads=[admitted(create.manifest, worker=2)])
    creates = actions_of(plan, CreatePod)
    assert [a.name for a in creates] == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
    renderer = PodRenderer(job, EXTERNAL, plan.replica_specs)
    for action in creates:
        env = {
            v["name"]: v["value"] for v in renderer.manifest(action)["spec"]["containers"][0]["env"]
        }
        # The Master and the 2 Workers admitted, not the 4 the job asks.
        assert env["WORLD_SIZE"] == "3"
    worker_1 = renderer.manifest(creates[2])["spec"]["containers"][0]["env"]
    assert {"name": "RANK", "value": "2"} in worker_1


# -- stopped ---------------------------------------------------------------------------


def test_an_evicted_job_is_suspended_and_gives_its_quota_back_once_its_pods_are_gone() -> None:
    job = tfjob(suspend=False, status={**RUNNING, "restartCount": 1})
    preempted = condition("Evicted", reason="Preempted", message="Preempted to make room")
    workload = admitted(created_workload(job), preempted)
    gang = Settings(kueue_integration="external", gang_scheduler_name="scheduler-plugins")
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "test-tfjob", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    plan = reconcile(
        job,
        pods("worker", 2),
        services("worker", 2),
        NOW,
        gang,
        [group],
        workloads=[workload],
        flavors=FLAVORS,
    )
    assert plan.actions[0] == SetSuspend(value=True)
    assert sorted(a.name for a in actions_of(plan, DeletePod)) == [
        "test-tfjob-worker-0",
        "test-tfjob-worker-1",
    ]
    assert len(actions_of(plan, DeleteService)) == 2
    assert [a.kind.kind for a in actions_of(plan, DeleteGroup)] == ["PodGroup"]
    assert not actions_of(plan, CreatePod)
    assert ("Stopped", "Preempted to make room") in events(plan)
    assert status_of(plan, "Suspended") == ("True", "TFJobSuspended")
    assert plan.status.restart_count == 1
    # Its pods still hold the quota: the Workload keeps it (only PodsReady is written).
    reserved = workload_status(plan)
    assert conditions_of(reserved)["QuotaReserved"] == ("True", "QuotaReserved")
    assert "admission" in reserved

    # The next pass: the job is suspended, its pods are gone.
    suspended = tfjob(suspend=True, status=msgspec.to_builtins(plan.status))
    after = plan_of(suspended, workloads=[workload], priority=None, settings=gang)
    status = workload_status(after)
    assert "admission" not in status
    assert conditions_of(status) == {
        "QuotaReserved": ("False", "Pending"),
        "Admitted": ("False", "NoReservation"),
        "Evicted": ("True", "Preempted"),
        "Requeued": ("True", "Preempted"),
        "PodsReady": ("False", "WaitForStart"),
    }
    assert not actions_of(after, SetSuspend)
    assert after.status.restart_count == 1


def test_a_workload_being_deleted_stops_the_job_and_lets_its_finalizer_go() -> None:
    job = tfjob(suspend=False, status=RUNNING)
    manifest = created_workload(job)
    manifest["metadata"]["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    plan = plan_of(job, pods("worker", 2), workloads=[admitted(manifest)])
    assert plan.actions[0] == SetSuspend(value=True)
    [release] = actions_of(plan, UpdateGroup)
    assert release.manifest["metadata"]["finalizers"] == []
    assert ("Stopped", "Workload is deleted") in events(plan)


def test_a_job_changed_while_running_stops_and_its_old_workload_goes() -> None:
    job = tfjob(suspend=False, status=RUNNING)
    old = admitted(created_workload(job))
    scaled = tfjob(suspend=False, status=RUNNING, workers=3)
    plan = plan_of(scaled, pods("worker", 2), workloads=[old])
    assert plan.actions[0] == SetSuspend(value=True)
    release, delete = plan.actions[1:3]
    assert isinstance(release, UpdateGroup) and release.manifest["metadata"]["finalizers"] == []
    assert delete == DeleteGroup(kind=queued.WORKLOAD, name=old.metadata.name)
    assert not actions_of(plan, CreateGroup)  # until its pods are gone
    assert ("Stopped", "No matching Workload") in events(plan)


# -- running and finished --------------------------------------------------------------


def test_pods_ready_follows_the_job_and_is_written_only_on_change() -> None:
    job = tfjob(suspend=False, status=RUNNING)
    workload = admitted(created_workload(job))
    plan = plan_of(job, pods("worker", 2), workloads=[workload])
    assert conditions_of(workload_status(plan))["PodsReady"] == ("True", "Started")
    ready = condition("PodsReady", reason="Started")
    again = plan_of(job, pods("worker", 2), workloads=[admitted(created_workload(job), ready)])
    assert not actions_of(again, UpdateGroupStatus)
    assert not actions_of(again, SetSuspend)


def test_a_finished_job_finishes_its_workload_then_lets_its_finalizer_go() -> None:
    done = {"conditions": [condition("Created"), condition("Succeeded", message="done")]}
    job = tfjob(suspend=False, status=done)
    workload = admitted(created_workload(job))
    plan = plan_of(job, workloads=[workload])
    finished = next(c for c in workload_status(plan)["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True",
        "Succeeded",
        "done",
    )
    assert finished["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    name = workload.metadata.name
    assert ("FinishedWorkload", f"Workload 'default/{name}' is declared finished") in events(plan)
    assert not actions_of(plan, SetSuspend)

    written = admitted(created_workload(job), condition("Finished", reason="Succeeded"))
    after = plan_of(job, workloads=[written])
    [release] = after.actions
    assert isinstance(release, UpdateGroup)
    assert release.manifest["metadata"]["finalizers"] == []
    assert not actions_of(plan_of(job, workloads=[written]), UpdateGroupStatus)


# -- not queued by tfjob ---------------------------------------------------------------


def test_builtin_mode_plans_exactly_what_it_did_without_kueue_inputs() -> None:
    cases: list[tuple[Job, list[Any]]] = [
        (tfjob(), []),
        (tfjob(suspend=True), []),
        (tfjob(suspend=False, status=RUNNING), pods("worker", 2)),
    ]
    for job, observed in cases:
        workload = admitted(created_workload(job), condition("Evicted", reason="Preempted"))
        today = reconcile(job, observed, [], NOW, Settings())
        given = reconcile(
            job,
            observed,
            [],
            NOW,
            Settings(),
            workloads=[workload],
            flavors=FLAVORS,
            priority=Priority(POD_PRIORITY_CLASS, "x", 5),
        )
        assert given == today
        assert given.replica_specs is None


def test_a_job_without_a_queue_is_not_queued_in_external_mode() -> None:
    job = tfjob(labels={})
    queued_job = tfjob()
    workload = admitted(created_workload(queued_job))
    today = reconcile(job, [], [], NOW, Settings())
    given = reconcile(job, [], [], NOW, EXTERNAL, workloads=[workload], flavors=FLAVORS)
    assert given == today
    assert (
        sorted(type(a).__name__ for a in given.actions) == ["CreatePod"] * 2 + ["CreateService"] * 2
    )


def test_a_workload_whose_job_is_gone_finishes_then_lets_its_finalizer_go() -> None:
    held = admitted(created_workload(tfjob())).document
    held["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    [finish] = queued.orphaned([held], NOW)
    assert isinstance(finish, UpdateGroupStatus)
    [done] = [c for c in finish.manifest["status"]["conditions"] if c["type"] == "Finished"]
    assert (done["status"], done["reason"]) == ("True", "OwnerNotFound")
    [release] = queued.orphaned([finish.manifest], NOW)
    assert isinstance(release, UpdateGroup)
    assert release.manifest["metadata"]["finalizers"] == []
    assert queued.orphaned([release.manifest], NOW) == []
