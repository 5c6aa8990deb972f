"""Kueue's Workload of a queued job, decided in the core (tfjob.core.queueing).

The expected objects are written out field by field from Kueue v0.19.0's job
framework (pkg/controller/jobframework, pkg/controller/jobs/kubeflow, pkg/podset,
apis/kueue/v1beta2), not taken from the code under test.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from tfjob.api.types import Job
from tfjob.core import queueing as q
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.registry import FRAMEWORKS

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
UID = "uid-1"
QUEUE = {"kueue.x-k8s.io/queue-name": "training"}
INDEX_LABEL = {"podIndexLabel": "training.kubeflow.org/replica-index"}


def template(image: str = "tf:1", **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "tensorflow", "image": image}], **spec}}


def replica(replicas: int | None = 1, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"template": template(**spec)}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def make(
    kind: str = "TFJob",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    **specs: dict[str, Any],
) -> Job:
    """A job of `kind` named test-job whose replica specs are the keyword arguments."""
    framework = FRAMEWORKS[kind]
    document: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {
            "name": "test-job",
            "namespace": "team-a",
            "uid": UID,
            "labels": QUEUE if labels is None else labels,
            "annotations": annotations or {},
        },
        "spec": {framework.spec_field: specs, **(spec or {})},
    }
    if status is not None:
        document["status"] = status
    return decode_job(document, framework.job_type)


def workload(job: Job, *conditions: tuple[str, str], **status: Any) -> dict[str, Any]:
    """The job's Workload as Kueue would show it, with these (type, status) conditions."""
    out = q.workload_manifest(job, priority=None)
    out["metadata"]["generation"] = 1
    conds = [
        {
            "type": t,
            "status": s,
            "reason": t,
            "message": "",
            "lastTransitionTime": "2026-11-30T11:00:00Z",
        }
        for t, s in conditions
    ]
    out["status"] = {"conditions": conds, **status}
    return out


def admitted(job: Job, **assignments: dict[str, Any]) -> dict[str, Any]:
    """The job's Workload admitted in ClusterQueue cq-a, each podSet with its assignment."""
    return workload(
        job,
        ("QuotaReserved", "True"),
        ("Admitted", "True"),
        admission={
            "clusterQueue": "cq-a",
            "podSetAssignments": [{"name": n, **a} for n, a in assignments.items()],
        },
    )


FLAVORS = {
    "spot": {
        "metadata": {"name": "spot"},
        "spec": {
            "nodeLabels": {"pool": "spot"},
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        },
    },
    "gpu": {"metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"accelerator": "a100"}}},
}


# -- names -----------------------------------------------------------------------------


def test_a_job_without_the_queue_label_has_no_workload() -> None:
    job = make(labels={}, Worker=replica(2))
    assert q.queue_name(job) is None
    with pytest.raises(q.WorkloadError, match="names no queue"):
        q.workload_manifest(job, priority=None)


def test_the_queue_is_the_queue_name_label() -> None:
    assert q.queue_name(make(Worker=replica())) == "training"


# Expected names from Kueue v0.19.0 itself: a throwaway Go program (not kept) that
# printed jobframework.GetWorkloadNameForOwnerWithGVK(name, uid, kubeflow.org/v1 kind),
# then the same with the ShortWorkloadNames gate set (utilfeature Set).
LONG_NAME = "run-" + "abcdefghij" * 30
LONG_CUT = "run-" + "abcdefghij" * 23 + "abcdef"


@pytest.mark.parametrize(
    ("kind", "name", "uid", "short", "expected"),
    [
        ("TFJob", "test-tfjob", "uid-1", False, "tfjob-test-tfjob-70c21"),
        (
            "PyTorchJob",
            "mnist",
            "0f6a3c52-8d3e-4b59-9d0c-2b1f7c6a4e10",
            False,
            "pytorchjob-mnist-89de0",
        ),
        ("MPIJob", LONG_NAME, "u-2", False, f"mpijob-{LONG_CUT}-cec3b"),
        ("TFJob", "test-tfjob", "uid-1", True, "tfjob-test-tfjob-70c21"),
        ("MPIJob", LONG_NAME, "u-2", True, "mpijob-run-" + "abcdefghij" * 4 + "abcdef-cec3b"),
    ],
)
def test_the_workload_name_is_kueues(
    kind: str, name: str, uid: str, short: bool, expected: str
) -> None:
    assert q.workload_name_for(name, uid, kind, "kubeflow.org", short=short) == expected


def test_the_workload_name_is_kind_and_name_then_a_hash_of_the_owner() -> None:
    # By hand from the rule: "<kind lower>-<name>", "-", then the first 5 hex digits
    # of sha1("<Kind>\n<group>\n<name>\n<uid>").
    digest = hashlib.sha1(b"PyTorchJob\nkubeflow.org\nmnist\nabc-123").hexdigest()
    expected = "pytorchjob-mnist-" + digest[:5]
    assert q.workload_name_for("mnist", "abc-123", "PyTorchJob", "kubeflow.org") == expected
    assert q.workload_name(make("PyTorchJob", Worker=replica())) == q.workload_name_for(
        "test-job", UID, "PyTorchJob", "kubeflow.org"
    )


def test_a_long_name_is_cut_before_the_hash() -> None:
    name = "x" * 300
    long = q.workload_name_for(name, "u", "TFJob", "kubeflow.org")
    short = q.workload_name_for(name, "u", "TFJob", "kubeflow.org", short=True)
    assert len(long) == 253 and long.startswith("tfjob-xxx") and long[-6] == "-"
    assert len(short) == 63 and short[-5:] == long[-5:]


# -- the Workload ----------------------------------------------------------------------


def test_a_tfjob_gives_one_podset_per_replica_type_in_kueues_order() -> None:
    job = make(
        Worker=replica(2, image="w:1"),
        Evaluator=replica(1),
        Chief=replica(1, image="c:1"),
        PS=replica(None),
    )
    wl = q.workload_manifest(job, priority=None)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("chief", 1),
        ("ps", 1),
        ("worker", 2),
        ("evaluator", 1),
    ]
    worker = wl["spec"]["podSets"][2]
    assert worker == {
        "name": "worker",
        "template": template("w:1"),
        "count": 2,
        "topologyRequest": INDEX_LABEL,
    }


def test_each_kind_declares_kueues_podset_order() -> None:
    # Kueue v0.19.0's OrderedReplicaTypes per kind (kubeflow/jobs/*, jobs/mpijob).
    assert {kind: f.queue_types for kind, f in FRAMEWORKS.items()} == {
        "TFJob": ("Chief", "Master", "PS", "Worker", "Evaluator"),
        "PyTorchJob": ("Master", "Worker"),
        "XGBoostJob": ("Master", "Worker"),
        "PaddleJob": ("Master", "Worker"),
        "JAXJob": ("Worker",),
        "MPIJob": ("Launcher", "Worker"),
    }


def test_a_kind_kueue_does_not_know_lists_its_podsets_in_its_own_order() -> None:
    framework = FRAMEWORKS["TFJob"]
    unknown = type("Unknown", (type(framework),), {"queue_order": ()})()
    assert unknown.queue_types == framework.replica_types


def test_the_workload_is_owned_by_the_job_and_queued_where_it_says() -> None:
    job = make(
        labels={**QUEUE, "kueue.x-k8s.io/max-exec-time-seconds": "3600", "team": "a"},
        annotations={"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60", "note": "x"},
        Worker=replica(),
    )
    wl = q.workload_manifest(job, priority=None, label_keys_to_copy={"team"})
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2" and wl["kind"] == "Workload"
    assert wl["metadata"] == {
        "name": q.workload_name(job),
        "namespace": "team-a",
        "labels": {"team": "a", "kueue.x-k8s.io/job-uid": UID},
        "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "60"},
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "name": "test-job",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert wl["spec"]["queueName"] == "training"
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 3600


@pytest.mark.parametrize("value", ["0", "-5", "ten", "99999999999"])
def test_an_unreadable_time_limit_is_no_limit(value: str) -> None:
    job = make(labels={**QUEUE, "kueue.x-k8s.io/max-exec-time-seconds": value}, Worker=replica())
    assert "maximumExecutionTimeSeconds" not in q.workload_manifest(job, priority=None)["spec"]


def test_an_elastic_pytorchjob_may_be_admitted_with_fewer_workers() -> None:
    elastic = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8}}
    job = make("PyTorchJob", spec=elastic, Master=replica(), Worker=replica(6))
    sets = q.workload_manifest(job, priority=None)["spec"]["podSets"]
    assert [(p["name"], p["count"], p.get("minCount")) for p in sets] == [
        ("master", 1, None),
        ("worker", 6, 2),
    ]
    plain = make("PyTorchJob", Master=replica(), Worker=replica(6))
    assert all("minCount" not in p for p in q.pod_sets(plain))
    whole = make("PyTorchJob", spec={"elasticPolicy": {"minReplicas": 6}}, Worker=replica(6))
    assert all("minCount" not in p for p in q.pod_sets(whole))


def test_a_paddlejob_elastic_policy_never_asks_for_fewer_workers() -> None:
    """Kubeflow v1.9.4 gives a PaddleJob's elasticPolicy no env (PADDLE_NNODES is
    every replica, fixed): admitted with fewer Workers, the job would train at a
    size its user never asked for, so its Workload asks for all of them."""
    elastic = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8}}
    job = make("PaddleJob", spec=elastic, Worker=replica(6))
    assert [(p["name"], p["count"], p.get("minCount")) for p in q.pod_sets(job)] == [
        ("worker", 6, None)
    ]


def test_an_mpijob_lists_its_launcher_first_and_counts_unset_workers_as_none() -> None:
    job = make("MPIJob", Worker=replica(None), Launcher=replica())
    assert [(p["name"], p["count"]) for p in q.pod_sets(job)] == [("launcher", 1), ("worker", 0)]


def test_every_kind_lists_its_podsets_in_kueues_order() -> None:
    assert [
        p["name"] for p in q.pod_sets(make("PyTorchJob", Worker=replica(), Master=replica()))
    ] == ["master", "worker"]
    assert [
        p["name"] for p in q.pod_sets(make("XGBoostJob", Worker=replica(), Master=replica()))
    ] == ["master", "worker"]
    assert [
        p["name"] for p in q.pod_sets(make("PaddleJob", Worker=replica(), Master=replica()))
    ] == ["master", "worker"]
    assert [p["name"] for p in q.pod_sets(make("JAXJob", Worker=replica(3)))] == ["worker"]


def test_a_variable_named_twice_keeps_its_last_value_at_its_first_place() -> None:
    spec = replica()
    spec["template"]["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
        {"name": "A", "value": "3"},
    ]
    (pod_set,) = q.pod_sets(make(Worker=spec))
    assert pod_set["template"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "3"},
        {"name": "B", "value": "2"},
    ]
    assert spec["template"]["spec"]["containers"][0]["env"][0]["value"] == "1"  # a copy


def test_topology_annotations_become_the_podsets_topology_request() -> None:
    notes = {
        "kueue.x-k8s.io/podset-required-topology": "rack",
        "kueue.x-k8s.io/podset-slice-required-topology": "host",
        "kueue.x-k8s.io/podset-slice-size": "2",
        "kueue.x-k8s.io/podset-group-name": "g",
    }
    spec = replica(4)
    spec["template"]["metadata"] = {"annotations": notes}
    (pod_set,) = q.pod_sets(make(Worker=spec))
    assert pod_set["topologyRequest"] == {
        "required": "rack",
        "podSetSliceRequiredTopology": "host",
        "podSetSliceSize": 2,
        "podIndexLabel": "training.kubeflow.org/replica-index",
        "podSetGroupName": "g",
    }
    spec["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "yes"}
    }
    with pytest.raises(q.WorkloadError, match="not a boolean"):
        q.pod_sets(make(Worker=spec))


# -- priority --------------------------------------------------------------------------


def test_a_workload_priority_class_wins_over_the_pods_priority_class() -> None:
    job = make(
        labels={**QUEUE, "kueue.x-k8s.io/priority-class": "high"},
        spec={"runPolicy": {"schedulingPolicy": {"priorityClass": "batch"}}},
        Worker=replica(priorityClassName="pods"),
    )
    assert q.wanted_priority_class(job) == ("kueue.x-k8s.io/workloadpriorityclass", "high")


def test_the_scheduling_policy_then_the_first_template_name_the_pod_priority_class() -> None:
    policy = {"runPolicy": {"schedulingPolicy": {"priorityClass": "batch"}}}
    job = make(spec=policy, Worker=replica(priorityClassName="pods"))
    assert q.wanted_priority_class(job) == ("scheduling.k8s.io/priorityclass", "batch")
    job = make(Worker=replica(priorityClassName="worker"), Chief=replica(priorityClassName="chief"))
    assert q.wanted_priority_class(job) == ("scheduling.k8s.io/priorityclass", "chief")
    assert q.wanted_priority_class(make(Worker=replica())) is None


def test_the_resolved_priority_goes_into_the_workload() -> None:
    job = make(Worker=replica())
    wpc = q.Priority(q.WORKLOAD_PRIORITY_CLASS, "high", 1000)
    spec = q.workload_manifest(job, priority=wpc)["spec"]
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    assert spec["priority"] == 1000
    pc = q.workload_manifest(job, priority=q.Priority(q.POD_PRIORITY_CLASS, "batch", 7))["spec"]
    assert pc["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "batch",
    }
    none = q.workload_manifest(job, priority=None)["spec"]
    assert none["priority"] == 0 and "priorityClassRef" not in none


# -- admission -------------------------------------------------------------------------


def test_a_workload_with_quota_but_not_admitted_does_not_start_the_job() -> None:
    job = make(Worker=replica(2))
    wl = admitted(job, worker={"flavors": {"cpu": "spot"}})
    wl["status"]["conditions"][1]["status"] = "False"
    assert q.admission(wl) is None
    assert q.admission(workload(job)) is None


def test_a_flavors_node_labels_and_tolerations_reach_the_template() -> None:
    job = make(Chief=replica(), Worker=replica(3))
    wl = admitted(
        job,
        chief={"flavors": {"cpu": "spot"}, "count": 1},
        worker={"flavors": {"cpu": "spot", "nvidia.com/gpu": "gpu", "memory": "spot"}},
    )
    seen = q.admission(wl)
    assert seen is not None and seen.cluster_queue == "cq-a"
    assert [(p.name, p.count) for p in seen.pod_sets] == [("chief", 1), ("worker", 3)]
    info = q.pod_set_info(seen, FLAVORS)["worker"]
    pod = q.inject(template(tolerations=[{"key": "own", "operator": "Exists"}]), info)
    assert pod["spec"]["nodeSelector"] == {"pool": "spot", "accelerator": "a100"}
    assert pod["spec"]["tolerations"] == [
        {"key": "own", "operator": "Exists"},
        {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert pod["metadata"]["labels"] == {
        "kueue.x-k8s.io/podset": "worker",
        "kueue.x-k8s.io/local-queue-name": "training",
        "kueue.x-k8s.io/cluster-queue-name": "cq-a",
    }
    assert pod["metadata"]["annotations"] == {"kueue.x-k8s.io/workload": q.workload_name(job)}


def test_a_conflicting_node_selector_key_is_reported() -> None:
    job = make(Worker=replica())
    info = q.pod_set_info(q.admission(admitted(job, worker={"flavors": {"cpu": "spot"}})), FLAVORS)  # type: ignore[arg-type]
    with pytest.raises(q.WorkloadError, match="nodeSelector key 'pool' is 'ondemand'") as error:
        q.inject(template(nodeSelector={"pool": "ondemand"}), info["worker"])
    failed = q.failed_to_start(workload(job), error.value)
    assert (failed["type"], failed["status"], failed["reason"]) == (
        "Finished",
        "True",
        "FailedToStart",
    )
    same = q.inject(template(nodeSelector={"pool": "spot", "zone": "a"}), info["worker"])
    assert same["spec"]["nodeSelector"] == {"pool": "spot", "zone": "a"}


def test_admission_checks_add_to_the_pods_and_may_not_contradict_each_other() -> None:
    job = make(Worker=replica(2))
    wl = admitted(job, worker={"flavors": {"cpu": "spot"}})
    update = {
        "name": "worker",
        "labels": {"check": "ok"},
        "nodeSelector": {"zone": "b"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    }
    wl["status"]["admissionChecks"] = [
        {"name": "prov", "state": "Ready", "podSetUpdates": [update]}
    ]
    info = q.pod_set_info(q.admission(wl), FLAVORS)["worker"]  # type: ignore[arg-type]
    assert info.labels["check"] == "ok"
    assert info.node_selector == {"pool": "spot", "zone": "b"}
    assert len(info.tolerations) == 1  # the same toleration once
    clash = {"name": "worker", "nodeSelector": {"pool": "reserved"}}
    wl["status"]["admissionChecks"].append(
        {"name": "other", "state": "Ready", "podSetUpdates": [clash]}
    )
    with pytest.raises(q.WorkloadError, match="admission check 'other'"):
        q.pod_set_info(q.admission(wl), FLAVORS)  # type: ignore[arg-type]


def test_a_partial_admission_says_how_many_replicas_run() -> None:
    elastic = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8}}
    job = make("PyTorchJob", spec=elastic, Master=replica(), Worker=replica(6))
    wl = admitted(
        job, master={"flavors": {"cpu": "spot"}}, worker={"flavors": {"cpu": "spot"}, "count": 4}
    )
    infos = q.pod_set_info(q.admission(wl), FLAVORS)  # type: ignore[arg-type]
    assert (infos["master"].count, infos["worker"].count) == (1, 4)


def test_a_flavor_not_yet_seen_is_an_error_to_retry() -> None:
    wl = admitted(make(Worker=replica()), worker={"flavors": {"cpu": "missing"}})
    with pytest.raises(q.FlavorNotFound, match="'missing'"):
        q.pod_set_info(q.admission(wl), FLAVORS)  # type: ignore[arg-type]


def test_a_topology_placed_podset_waits_behind_kueues_gate() -> None:
    wl = admitted(
        make(Worker=replica(2)),
        worker={"flavors": {"cpu": "gpu"}, "topologyAssignment": {"levels": ["h"], "slices": []}},
    )
    info = q.pod_set_info(q.admission(wl), FLAVORS)["worker"]  # type: ignore[arg-type]
    pod = q.inject(template(), info)
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"


# -- stopping, finishing, readiness ----------------------------------------------------


def test_an_evicted_workload_stops_the_job() -> None:
    wl = admitted(make(Worker=replica()), worker={})
    wl["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate a higher priority Workload",
        }
    )
    assert q.evicted(wl) == ("Preempted", "Preempted to accommodate a higher priority Workload")
    assert q.stop(wl, running=True) == (
        "WorkloadEvicted",
        "Preempted to accommodate a higher priority Workload",
    )
    wl["status"]["conditions"][-1]["status"] = "False"
    assert q.evicted(wl) is None and q.stop(wl, running=True) is None


def test_a_running_job_without_admission_or_workload_stops() -> None:
    job = make(Worker=replica())
    assert q.stop(workload(job), running=True) == ("NotAdmitted", "Not admitted by cluster queue")
    assert q.stop(workload(job), running=False) is None
    assert q.stop(None, running=True) is not None and q.stop(None, running=False) is None
    deleting = workload(job)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    assert q.stop(deleting, running=False) == ("WorkloadDeleted", "Workload is deleted")


@pytest.mark.parametrize(("kind", "reason"), [("Succeeded", "Succeeded"), ("Failed", "Failed")])
def test_the_job_ending_finishes_its_workload(kind: str, reason: str) -> None:
    ended = {
        "conditions": [
            {"type": "Running", "status": "False"},
            {"type": kind, "status": "True", "message": "TFJob test-job ended."},
        ]
    }
    job = make(status=ended, Worker=replica())
    wl = admitted(job, worker={})
    assert q.finished_condition(job, wl) == {
        "type": "Finished",
        "status": "True",
        "reason": reason,
        "message": "TFJob test-job ended.",
        "observedGeneration": 1,
    }
    wl["status"]["conditions"].append({"type": "Finished", "status": "True"})
    assert q.finished_condition(job, wl) is None
    assert q.finished_condition(make(Worker=replica()), workload(job)) is None


def test_a_finished_message_is_cut_as_kueue_cuts_it() -> None:
    ended = {"conditions": [{"type": "Failed", "status": "True", "message": "x" * 40000}]}
    job = make(status=ended, Worker=replica())
    message = q.finished_condition(job, workload(job))["message"]  # type: ignore[index]
    assert len(message) == 32 * 1024 and message.endswith("x ...")


def test_pods_ready_follows_the_jobs_running_condition() -> None:
    running = {"conditions": [{"type": "Running", "status": "True"}]}
    job = make(status=running, Worker=replica())
    stalled = make(Worker=replica())
    queued = workload(job)
    assert q.pods_ready_condition(queued, job)["reason"] == "WaitForStart"  # type: ignore[index]
    wl = admitted(job, worker={})
    ready = q.pods_ready_condition(wl, job)
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "Started")
    assert ready["message"] == "All pods reached readiness and the workload is running"
    wl["status"]["conditions"].append({**ready, "lastTransitionTime": "2026-11-30T11:30:00Z"})
    assert q.pods_ready_condition(wl, job) is None  # unchanged: nothing to write
    lost = q.pods_ready_condition(wl, stalled)
    assert lost is not None and (lost["status"], lost["reason"]) == ("False", "WaitForRecovery")
    wl["status"]["conditions"][-1] = lost
    assert q.pods_ready_condition(wl, job)["reason"] == "Recovered"  # type: ignore[index]


def test_an_evicted_job_without_pods_gives_its_quota_back() -> None:
    wl = admitted(make(Worker=replica()), worker={})
    wl["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by a higher one"}
    )
    assert q.quota_release(wl, job_active=True, now=NOW) is None
    status = q.quota_release(wl, job_active=False, now=NOW)
    assert status is not None and "admission" not in status
    by_type = {x["type"]: x for x in status["conditions"]}
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == (
        "False",
        "Pending",
    )
    assert by_type["QuotaReserved"]["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == (
        "False",
        "NoReservation",
    )
    assert status["accumulatedPastExecutionTimeSeconds"] == 3600
    wl["status"] = status
    assert q.quota_release(wl, job_active=False, now=NOW) is None  # nothing left to release


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    old = [
        {
            "type": "PodsReady",
            "status": "False",
            "reason": "WaitForStart",
            "lastTransitionTime": "2026-11-30T11:00:00Z",
        }
    ]
    same = q.set_condition(old, {"type": "PodsReady", "status": "False", "reason": "Other"}, NOW)
    assert same[0]["lastTransitionTime"] == "2026-11-30T11:00:00Z" and same[0]["reason"] == "Other"
    moved = q.set_condition(old, {"type": "PodsReady", "status": "True", "reason": "Started"}, NOW)
    assert moved[0]["lastTransitionTime"] == "2026-11-30T12:00:00Z"


def test_a_workload_whose_job_is_gone_finishes_and_lets_go() -> None:
    wl = admitted(make(Worker=replica()), worker={})
    assert not q.releases_finalizer(wl, job_exists=True)
    assert q.releases_finalizer(wl, job_exists=False)
    gone = q.orphan_condition(wl)
    assert gone is not None and (gone["reason"], gone["message"]) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )
    wl["status"]["conditions"].append(gone)
    assert q.orphan_condition(wl) is None and q.releases_finalizer(wl, job_exists=True)


# -- keeping the Workload in step ------------------------------------------------------


def test_a_workload_matches_its_job_until_the_job_changes_what_kueue_counts() -> None:
    job = make(Worker=replica(2, image="w:1"))
    wl = workload(job)
    assert q.workload_matches(wl, job)
    assert not q.workload_matches(wl, make(Worker=replica(3, image="w:1")))
    assert not q.workload_matches(wl, make(Worker=replica(2, image="w:2")))
    relabelled = make(Worker=replica(2, image="w:1"))
    relabelled.spec.replica_specs["Worker"].template["metadata"] = {"labels": {"any": "thing"}}
    assert q.workload_matches(wl, relabelled)
    other = workload(job)
    other["metadata"]["ownerReferences"][0]["uid"] = "uid-old"
    assert not q.workload_matches(other, job)


def test_quantities_and_unset_fields_compare_as_kubernetes_compares_them() -> None:
    spec = replica()
    spec["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "1Gi", "cpu": "1"}
    }
    wl = workload(make(Worker=spec))
    same = copy.deepcopy(spec)
    same["template"]["spec"]["containers"][0].update(
        resources={"requests": {"memory": "1024Mi", "cpu": "1000m"}}, args=[], stdin=False
    )
    assert q.workload_matches(wl, make(Worker=same))


def test_an_admitted_workload_ignores_tolerations_and_counts_what_it_admitted() -> None:
    elastic = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8}}
    job = make("PyTorchJob", spec=elastic, Worker=replica(6))
    wl = admitted(job, worker={"flavors": {"cpu": "spot"}, "count": 4})
    shrunk = make("PyTorchJob", spec=elastic, Worker=replica(4))
    assert q.workload_matches(wl, job, FLAVORS)  # as written: the admission is tfjob's to apply
    assert not q.workload_matches(wl, shrunk)  # flavors unknown: no running view
    assert q.workload_matches(wl, shrunk, FLAVORS)  # the admitted count written into the job
    tolerant = make(
        "PyTorchJob",
        spec=elastic,
        Worker=replica(6, tolerations=[{"key": "k", "operator": "Exists"}]),
    )
    assert q.workload_matches(wl, tolerant)
    assert not q.workload_matches(workload(job), tolerant)


def test_a_job_with_no_workload_gets_one_once_its_pods_are_gone() -> None:
    job = make(Worker=replica())
    sync = q.sync_workloads(job, [], suspended=True, active=False, priority=None)
    assert sync.create == q.workload_manifest(job, priority=None) and sync.stop is None
    assert q.sync_workloads(job, [], suspended=True, active=True, priority=None).create is None
    running = q.sync_workloads(job, [], suspended=False, active=True, priority=None)
    assert running.create is None and running.stop == ("NoMatchingWorkload", "Missing Workload")


def test_a_queued_job_that_changed_rewrites_its_workload_in_place() -> None:
    old = workload(make(Worker=replica(2)))
    old["spec"]["active"] = False
    job = make(Worker=replica(5))
    extra = workload(make(Worker=replica(9)))
    extra["metadata"]["name"] = "extra"
    sync = q.sync_workloads(job, [old, extra], suspended=True, active=False, priority=None)
    assert sync.match is None and sync.stop is None
    assert sync.update is not None and sync.update["metadata"] == old["metadata"]
    assert (
        sync.update["spec"]["podSets"][0]["count"] == 5 and sync.update["spec"]["active"] is False
    )
    assert sync.delete == ("extra",)


def test_a_running_job_that_changed_is_stopped_and_its_workload_deleted() -> None:
    old = admitted(make(Worker=replica(2)), worker={})
    sync = q.sync_workloads(
        make(Worker=replica(5)), [old], suspended=False, active=True, priority=None
    )
    assert sync.stop == ("NoMatchingWorkload", "No matching Workload")
    assert sync.delete == (old["metadata"]["name"],) and sync.update is None and sync.create is None


def test_a_queued_job_moved_to_another_queue_or_priority_retargets_its_workload() -> None:
    wl = workload(make(Worker=replica()))
    moved = make(
        labels={"kueue.x-k8s.io/queue-name": "other", "kueue.x-k8s.io/priority-class": "high"},
        Worker=replica(),
    )
    high = q.Priority(q.WORKLOAD_PRIORITY_CLASS, "high", 100)
    sync = q.sync_workloads(moved, [wl], suspended=True, active=False, priority=high)
    assert sync.match == wl and sync.update is not None
    assert sync.update["spec"]["queueName"] == "other"
    assert sync.update["spec"]["priorityClassRef"]["name"] == "high"
    assert sync.update["spec"]["priority"] == 100
    same = q.sync_workloads(
        make(Worker=replica()), [wl], suspended=True, active=False, priority=None
    )
    assert same.update is None and same.delete == ()


def test_a_pod_priority_class_is_never_retargeted() -> None:
    wl = workload(make(Worker=replica()))
    wl["spec"].update(
        priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch"},
        priority=7,
    )
    job = make(labels={**QUEUE, "kueue.x-k8s.io/priority-class": "high"}, Worker=replica())
    assert not q.priority_outdated(wl, job)
    assert q.priority_outdated(workload(make(Worker=replica())), job)
