"""tfjob's operator under a real Kueue manager, on the real scheduler and kwok nodes.

Kueue holds a queued job suspended (its webhook sets ``runPolicy.suspend`` at
creation) until the job's ClusterQueue has quota for it, then admits it: it writes the
chosen flavour's node selector and tolerations into the replica templates and
unsuspends the job. To evict a job it suspends it again and waits until the job has
no active pods before it frees the quota. The operator's side of that contract is
what these tests hold, for every kind in ``KINDS``: no pod while suspended, pods built
from the templates as admitted, everything gone promptly on eviction, a clean resume,
and hands off entirely for ``managedBy: kueue.x-k8s.io/multikueue``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Secret

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.kueue import KUEUE_API, QueuedJobs, Queues, Worker, workload_condition
from testkit.kueue import NAMESPACE as KUEUE_NAMESPACE
from testkit.operators import Operators
from tests.kubernetes.kueue.conftest import every_kind

#: The kinds Kueue v0.19.0's MultiKueue really dispatches: its webhook on a worker
#: refuses the copy of a JAXJob (the prebuilt-workload-name annotation "Is not
#: supported").
DISPATCHED_BY_MULTIKUEUE = ("TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob")
POOL_LABEL = "tfjob.test/pool"
SPOT_TAINT = "tfjob.test/spot"


def _admitted(queued: QueuedJobs, name: str) -> bool:
    admitted = workload_condition(queued.workload(name), "Admitted")
    return admitted is not None and admitted["status"] == "True"


def _pods_ready(queued: QueuedJobs, name: str) -> bool:
    """Kueue's WaitForPodsReady (on by default since v0.19) reads the job's Running
    condition as "all pods ready"; without it Kueue evicts the job after 30 min."""
    ready = workload_condition(queued.workload(name), "PodsReady")
    return ready is not None and ready["status"] == "True"


@every_kind
def test_quota_holds_the_second_job_suspended_with_no_pod_until_the_first_ends(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    nodes.add(2, cpu="4")  # room for both jobs: only Kueue's quota holds one back
    queue = queues.queue(cpu="4")
    operators.start()

    queued.create("first", 4, queue=queue)
    queued.running_pods("first", 4)
    assert not queued.suspended("first") and _admitted(queued, "first")
    wait_for(lambda: _pods_ready(queued, "first"), message="Kueue to see first's pods ready")
    queued.create("second", 4, queue=queue)
    verdict = wait_for(
        lambda: queued.pending_for_quota("second"), message="Kueue to hold the second job"
    )
    assert "insufficient" in verdict["message"], verdict
    assert queued.suspended("second")
    assert queued.pods("second") == {}
    assert queued.services("second") == {}
    assert queued.wait_condition("second", "Suspended")["reason"] == f"{queued.kind}Suspended"
    assert queued.condition("second", "Running") is None
    # Not even a pod made and deleted again: the operator never created one (it
    # records each creation, as it did for the first job).
    assert _pod_creations(queued, "first") == 4
    assert _pod_creations(queued, "second") == 0

    queued.end_pods("first")
    queued.wait_condition("first", "Succeeded")
    wait_for(lambda: not queued.suspended("second"), message="Kueue to admit the second job")
    queued.running_pods("second", 4)
    assert _admitted(queued, "second")
    # The status comes with (or after) the pods it creates: wait for it, not the pods.

    def suspended_reasons() -> list[str]:
        conditions = queued.get("second")["status"].get("conditions") or []
        return [c["reason"] for c in conditions if c["type"] == "Suspended"]

    wait_for(
        lambda: suspended_reasons() == [f"{queued.kind}Resumed"],
        message="the second job's Suspended condition to say Resumed",
    )
    queued.end_pods("second")
    queued.wait_condition("second", "Succeeded")


@every_kind
def test_admission_gives_every_pod_the_flavours_node_selector_and_tolerations(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """The flavour's nodes are tainted: a pod without the flavour's toleration could
    not be placed there, and one without its node selector could land on the roomy
    plain node."""
    taint = {"key": SPOT_TAINT, "value": "true", "effect": "NoSchedule"}
    spot = nodes.add(2, cpu="2", labels={POOL_LABEL: "spot"}, taints=[taint])
    nodes.add(1, cpu="8")
    toleration = {"key": SPOT_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    flavor = queues.flavor("spot", nodeLabels={POOL_LABEL: "spot"}, tolerations=[toleration])
    queue = queues.queue(cpu="4", flavor=flavor)
    operators.start()

    queued.create("spot", 4, queue=queue)
    pods = queued.running_pods("spot", 4)
    for name, pod in pods.items():
        assert pod["spec"]["nodeSelector"] == {POOL_LABEL: "spot"}, name
        assert toleration in pod["spec"]["tolerations"], name
        assert pod["spec"]["nodeName"] in spot, name
    admission = queued.workload("spot")["status"]["admission"]  # type: ignore[index]
    assert {f for ps in admission["podSetAssignments"] for f in ps["flavors"].values()} == {flavor}
    queued.end_pods("spot")
    queued.wait_condition("spot", "Succeeded")


@every_kind
def test_preemption_evicts_the_low_job_and_it_resumes_cleanly_to_success(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    nodes.add(2, cpu="4")
    low = queues.priority_class("low", 100)
    high = queues.priority_class("high", 1000)
    queue = queues.queue(cpu="4", preemption={"withinClusterQueue": "LowerPriority"})
    operators.start("--gang-scheduler-name", "default-scheduler")

    queued.create("low", 4, queue=queue, priority=low)
    queued.running_pods("low", 4)
    queued.wait_condition("low", "Running")
    assert queued.gang_groups("low") == ["workloads/low", "podgroups/low"]
    before = queued.get("low")["status"]
    restarts = before.get("restartCount", 0)

    queued.create("high", 4, queue=queue, priority=high, run_for="2s")
    wait_for(lambda: queued.suspended("low"), timeout=20, message="Kueue to suspend low")
    # Within seconds of the suspension: nothing of the low job is left.
    wait_for(lambda: queued.pods("low") == {}, timeout=10, message="low's pods deleted")
    wait_for(lambda: queued.services("low") == {}, timeout=10, message="low's services deleted")
    wait_for(lambda: queued.gang_groups("low") == [], timeout=10, message="low's gang gone")
    suspended = queued.wait_condition("low", "Suspended", timeout=10)
    assert suspended["reason"] == f"{queued.kind}Suspended"
    assert queued.condition("low", "Running") is None
    # Why is Kueue's to say: on its Workload, and in its event on the job.
    evicted = workload_condition(queued.workload("low"), "Evicted")
    assert evicted is not None and evicted["status"] == "True", evicted
    assert evicted["reason"] == "Preempted", evicted
    stopped = [e for e in _job_events(queued, "low") if e["reason"] == "Stopped"]
    assert stopped and "Preempted" in stopped[-1]["message"], stopped

    queued.running_pods("high", 4)
    queued.wait_condition("high", "Succeeded")
    wait_for(lambda: not queued.suspended("low"), timeout=30, message="low re-admitted")
    queued.running_pods("low", 4)
    queued.end_pods("low")
    done = queued.wait_condition("low", "Succeeded")
    assert done
    status = queued.get("low")["status"]
    assert status.get("restartCount", 0) == restarts
    assert not any(c["type"] in ("Failed", "Restarting") for c in status["conditions"])


@every_kind
def test_an_admitted_jobs_gang_is_placed_whole(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """Kueue admits both jobs (quota for 8 CPUs), but the nodes have room for 5: the
    scheduler places one gang whole and none of the other until the first ends."""
    nodes.add(1, cpu="4")
    nodes.add(1, cpu="1")
    queue = queues.queue(cpu="8")
    operators.start("--gang-scheduler-name", "default-scheduler")
    queued.create("one", 4, queue=queue, run_for="2s")
    queued.create("two", 4, queue=queue, run_for="2s")
    wait_for(
        lambda: not queued.suspended("one") and not queued.suspended("two"),
        message="Kueue to admit both",
    )

    def bound(job: str) -> int:
        return sum(1 for p in queued.pods(job).values() if p["spec"].get("nodeName"))

    def placed() -> str | None:
        counts = {job: bound(job) for job in ("one", "two")}
        assert min(counts.values()) == 0, f"both gangs have pods bound: {counts}"
        return next((job for job, n in counts.items() if n == 4), None)

    first = wait_for(placed, timeout=20, message="one whole gang bound")
    other = "two" if first == "one" else "one"
    for pod in queued.pods(first).values():
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": first}
    queued.wait_condition(first, "Succeeded")
    wait_for(lambda: bound(other) == 4, timeout=20, message=f"{other}'s gang bound whole")
    queued.wait_condition(other, "Succeeded")


def _no_operator_writes(queued: QueuedJobs, name: str) -> None:
    assert queued.pods(name) == {}
    assert queued.services(name) == {}
    assert queued.gang_groups(name) == []


@every_kind
def test_multikueue_jobs_are_left_to_kueue_entirely(
    queued: QueuedJobs,
    queues: Queues,
    operators: Operators,
    nodes: Nodes,
    worker_cluster: Worker,
    kube: Client,
    tmp_path: Path,
) -> None:
    """On a MultiKueue manager cluster Kueue's webhook sets managedBy on a job queued to
    a ClusterQueue with a MultiKueue admission check; Kueue dispatches the job to a
    worker cluster, where that cluster's operator runs it, and copies its status back.
    The operator of the manager cluster must create nothing and write no status, even
    once the job is admitted and unsuspended there."""
    nodes.add(1, cpu="8")
    worker = queues.unique("worker")
    kube.create(
        Secret(
            metadata=ObjectMeta(name=worker, namespace=KUEUE_NAMESPACE),
            stringData={"kubeconfig": worker_cluster.plane.kubeconfig_path.read_text()},
        )
    )
    queues.made.append(f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{worker}")
    worker_cluster.kube.create(Namespace(metadata=ObjectMeta(name=queued.namespace)))
    queues.create(
        f"{KUEUE_API}/multikueueclusters",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
         "metadata": {"name": worker},
         "spec": {"clusterSource": {"kubeConfig": {"location": worker}}}},
    )  # fmt: skip
    queues.create(
        f"{KUEUE_API}/multikueueconfigs",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
         "metadata": {"name": (config := queues.unique("mk"))},
         "spec": {"clusters": [worker]}},
    )  # fmt: skip
    queues.create(
        f"{KUEUE_API}/admissionchecks",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
         "metadata": {"name": (check := queues.unique("mk"))},
         "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                 "name": config}}},
    )  # fmt: skip
    wait_for(
        lambda: _condition_true(queues.get(f"{KUEUE_API}/admissionchecks/{check}"), "Active"),
        timeout=30,
        message="the MultiKueue admission check Active (Kueue connected to the worker)",
    )
    cq = queues.cluster_queue(cpu="8", admission_checks=[check])
    queues.wait_active(cq)
    queue = queues.local_queue(cq)
    operators.start("--gang-scheduler-name", "default-scheduler")

    wait_for(
        lambda: _defaulted_to_multikueue(queued, queue),
        timeout=30,
        message="Kueue's webhook to set managedBy on a job of the MultiKueue queue",
    )
    # The worker mirrors the manager's namespace and LocalQueue, and runs an operator.
    on_worker = Queues(worker_cluster.plane, queued.namespace)
    on_worker.local_queue(on_worker.cluster_queue(cpu="8"), name=queue)
    remote_jobs = QueuedJobs(worker_cluster.plane, queued.namespace, queued.kind)
    worker_operator = Operators(worker_cluster.plane.kubeconfig_path, queued.namespace, tmp_path)
    try:
        worker_operator.start()
        if queued.kind in DISPATCHED_BY_MULTIKUEUE:
            _dispatched_and_copied_back(queued, remote_jobs, queue)
        else:
            _held_for_the_worker(queued, worker_cluster, queue)
    finally:
        for running in worker_operator.started:
            assert running.stop() == 0, running.log_tail()
        on_worker.cleanup()

    # A job nobody suspends, handed off from the start.
    queued.create(
        "handed", 2, run_policy={"managedBy": "kueue.x-k8s.io/multikueue", "suspend": False}
    )
    # What MultiKueue copies back from the worker cluster.
    copied = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "FromWorker", "message": "remote"},
            {"type": "Running", "status": "True", "reason": "FromWorker", "message": "remote"},
        ],
        "replicaStatuses": {"Worker": {"active": 2}},
        "startTime": "2026-01-01T00:00:00Z",
    }
    status, body = queued.patch("handed", {"status": copied}, "/status")
    assert status == 200, body

    # A job the operator does run, after them: once it is Running, the operator has
    # seen both handed-off jobs (it watches one namespace, in order) long since.
    queued.create("local", 1, run_for="1s")
    queued.wait_condition("local", "Succeeded")
    time.sleep(2)  # and a generous margin for any late write
    for name in ("remote", "handed"):
        _no_operator_writes(queued, name)
    # What is there is the worker's, copied by Kueue: nothing of this operator's.
    copied_back = (queued.get("remote").get("status") or {}).get("conditions") or []
    if queued.kind in DISPATCHED_BY_MULTIKUEUE:
        assert copied_back[0]["type"] == "Created", copied_back
    else:
        assert copied_back == []
    handed = queued.get("handed")["status"]
    assert handed["conditions"] == copied["conditions"]
    assert handed["replicaStatuses"] == copied["replicaStatuses"]
    assert handed["startTime"] == copied["startTime"]
    assert _operator_events(queued, "handed") == []
    assert _operator_events(queued, "remote") == []
    assert [e["reason"] for e in _operator_events(queued, "local")], "the control job's events"


def _dispatched_and_copied_back(queued: QueuedJobs, remote: QueuedJobs, queue: str) -> None:
    """A job queued on the manager runs on the worker; its status comes back."""
    queued.create("remote", 2, queue=queue)
    assert queued.get("remote")["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    # The worker's copy: Kueue created it without managedBy, its Kueue admitted it,
    # and the worker's operator made its pods (Pending: that cluster has no node).
    wait_for(lambda: len(remote.pods("remote")) == 2, timeout=60, message="pods on the worker")
    assert "managedBy" not in remote.get("remote")["spec"]["runPolicy"]
    worker_status = remote.wait_condition("remote", "Created")
    assert worker_status
    # Kueue admits the manager's job too and copies the worker's status onto it.
    wait_for(lambda: not queued.suspended("remote"), timeout=30, message="admitted on the manager")
    wait_for(
        lambda: queued.get("remote").get("status") == remote.get("remote")["status"],
        timeout=30,
        message="the worker's status copied to the manager's job",
    )


def _held_for_the_worker(queued: QueuedJobs, worker: Worker, queue: str) -> None:
    """Kueue v0.19.0 hands the Workload to the worker, whose Kueue then refuses the
    job's copy for this kind; the manager's job stays suspended, handed off."""
    queued.create("remote", 2, queue=queue)
    assert queued.get("remote")["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"

    def remote_workloads() -> list[str]:
        status, body = worker.plane.request(
            "GET", f"{KUEUE_API}/namespaces/{queued.namespace}/workloads"
        )
        assert status == 200, body
        return [w["metadata"]["name"] for w in body["items"]]

    wait_for(remote_workloads, timeout=30, message="the Workload created on the worker")
    assert queued.suspended("remote")
    status, _ = worker.plane.request("GET", f"{queued.path}/remote")
    assert status == 404, "the worker's Kueue let the job's copy in"


def _condition_true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def _job_events(queued: QueuedJobs, name: str) -> list[dict[str, Any]]:
    status, body = queued.plane.request(
        "GET",
        f"/api/v1/namespaces/{queued.namespace}/events?fieldSelector=involvedObject.name={name}",
    )
    assert status == 200, body
    events: list[dict[str, Any]] = body["items"]
    return events


def _pod_creations(queued: QueuedJobs, name: str) -> int:
    return sum(
        int(e.get("count") or 1)
        for e in _operator_events(queued, name)
        if e["reason"] == "SuccessfulCreatePod"
    )


def _operator_events(queued: QueuedJobs, name: str) -> list[dict[str, Any]]:
    """Events the operator recorded about the job (its kind's controller, such as
    tfjob-controller, is their source)."""
    component = queued.framework.controller_name
    return [
        e for e in _job_events(queued, name) if e.get("source", {}).get("component") == component
    ]


def _defaulted_to_multikueue(queued: QueuedJobs, queue: str) -> bool:
    """A dry run shows whether Kueue's cache knows the queue's admission check yet."""
    manifest = queued.manifest("probe", 1, queue=queue)
    status, body = queued.plane.request("POST", f"{queued.path}?dryRun=All", body=manifest)
    assert status == 201, body
    return bool(body["spec"].get("runPolicy", {}).get("managedBy") == "kueue.x-k8s.io/multikueue")


def test_managed_by_is_checked_at_admission(queued: QueuedJobs, kueue: Any) -> None:
    """Only the two upstream values, and never changed once set (the CRD's rules)."""
    manifest = queued.manifest("other", 1, run_policy={"managedBy": "example.com/mine"})
    status, body = queued.plane.request("POST", queued.path, body=manifest)
    assert status == 422, body
    assert "spec.runPolicy.managedBy" in body["message"]

    for value in ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"):
        name = value.split("/")[0].split(".")[0]
        queued.submit(queued.manifest(name, 1, run_policy={"managedBy": value, "suspend": True}))
    queued.submit(queued.manifest("unset", 1, run_policy={"suspend": True}))
    for name, other in (
        ("kubeflow", "kueue.x-k8s.io/multikueue"),
        ("kueue", "kubeflow.org/training-operator"),
        ("unset", "kueue.x-k8s.io/multikueue"),
        ("kueue", None),  # removing it hands a job Kueue runs elsewhere to this operator
    ):
        status, body = queued.patch(name, {"spec": {"runPolicy": {"managedBy": other}}})
        assert status == 422, body
        assert "spec.runPolicy.managedBy is immutable" in body["message"]
