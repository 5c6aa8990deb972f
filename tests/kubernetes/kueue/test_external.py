"""``tfjob operator --kueue-integration=external`` under the real Kueue manager.

Kueue runs with the kinds under ``integrations.externalFrameworks`` and no
kubeflow.org job webhook: it neither suspends a queued job nor makes its Workload.
tfjob does (core/queued.py): it makes and owns the job's Workload, holds the job
suspended until Kueue admits the Workload, runs it with the flavour's node labels in
its pods, suspends it and gives the quota back when Kueue evicts it, and finishes the
Workload when the job ends. Kueue's scheduler, webhooks and preemption are the real
ones; kwok nodes and the real kube-scheduler run the pods.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.kueue import GANG_API, KUEUE_API, QueuedJobs, Queues, workload_condition
from testkit.operators import Operators
from tests.kubernetes.kueue.conftest import every_kind

#: The conftest's ``kueue`` fixture: the kinds as Kueue's external frameworks.
KUEUE_EXTERNAL = True
#: The kinds of test_kueue.py (the operator serves them all), and MPIJob: Kueue's
#: built-in MPIJob integration is v2beta1's (mpi-operator), so only as an external
#: framework (``MPIJob.v1.kubeflow.org``) can tfjob's v1 MPIJob queue at all.
KINDS = ("TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob")
#: The conftest's ``kueue`` fixture: these kinds as its externalFrameworks.
KUEUE_KINDS = KINDS
#: What each node has besides CPU and memory: an MPIJob's launcher gets the
#: kubectl-delivery init container, whose limits ask 5Gi of ephemeral storage.
NODE_DISK = "50Gi"
POOL_LABEL = "tfjob.test/pool"
EXTERNAL = "--kueue-integration=external"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _true(queued: QueuedJobs, name: str, kind: str) -> bool:
    found = workload_condition(queued.workload(name), kind)
    return found is not None and found["status"] == "True"


def _owned_by_the_job(queued: QueuedJobs, name: str) -> dict[str, Any]:
    workload = wait_for(lambda: queued.workload(name), message=f"{name}'s Workload")
    job = queued.get(name)
    owners = workload["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owners] == [
        (queued.kind, name, job["metadata"]["uid"], True)
    ], owners
    found: dict[str, Any] = workload
    return found


def _workloads(queued: QueuedJobs, name: str) -> list[dict[str, Any]]:
    """Every Workload the job owns."""
    status, body = queued.plane.request(
        "GET", f"{KUEUE_API}/namespaces/{queued.namespace}/workloads"
    )
    assert status == 200, body
    return [
        item
        for item in body["items"]
        if any(o["name"] == name for o in item["metadata"].get("ownerReferences") or [])
    ]


def _spec_managers(workload: dict[str, Any]) -> set[str]:
    return {
        entry["manager"]
        for entry in workload["metadata"].get("managedFields") or []
        if "f:spec" in (entry.get("fieldsV1") or {})
    }


@every_kind
def test_a_job_runs_once_kueue_admits_the_workload_tfjob_made(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    pool = nodes.add(2, cpu="2", labels={POOL_LABEL: "a"}, ephemeral_storage=NODE_DISK)
    nodes.add(1, cpu="8", ephemeral_storage=NODE_DISK)  # roomy, but not the flavour's
    flavor = queues.flavor("pool-a", nodeLabels={POOL_LABEL: "a"})
    queue = queues.queue(cpu="4", flavor=flavor)
    operators.start(EXTERNAL)

    created = queued.create("first", 4, queue=queue, run_policy={"suspend": False})
    # No Kueue webhook for the kind: the job is stored as created, unsuspended.
    assert created["spec"]["runPolicy"]["suspend"] is False
    workload = _owned_by_the_job(queued, "first")
    assert workload["spec"]["queueName"] == queue
    # tfjob made it: its field manager wrote the spec (Kueue's only the status).
    assert _spec_managers(workload) == {"tfjob-operator"}, workload["metadata"]["managedFields"]
    assert sum(ps["count"] for ps in workload["spec"]["podSets"]) == 4
    wait_for(lambda: _true(queued, "first", "Admitted"), message="Kueue to admit first")
    pods = queued.running_pods("first", 4)
    for name, pod in pods.items():
        assert pod["spec"]["nodeSelector"] == {POOL_LABEL: "a"}, name
        assert pod["spec"]["nodeName"] in pool, name
    assert not queued.suspended("first")
    admission = queued.workload("first")["status"]["admission"]  # type: ignore[index]
    assert {f for ps in admission["podSetAssignments"] for f in ps["flavors"].values()} == {flavor}
    wait_for(lambda: _true(queued, "first", "PodsReady"), message="PodsReady on first's Workload")

    queued.end_pods("first")
    queued.wait_condition("first", "Succeeded")
    wait_for(lambda: _true(queued, "first", "Finished"), message="first's Workload Finished")
    finished = workload_condition(queued.workload("first"), "Finished")
    assert finished is not None and finished["reason"] == "Succeeded", finished


@every_kind
def test_a_job_beyond_the_quota_waits_suspended_with_no_pod_until_the_first_ends(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    nodes.add(
        2, cpu="4", ephemeral_storage=NODE_DISK
    )  # room for both: only Kueue's quota holds one back
    queue = queues.queue(cpu="4")
    operators.start(EXTERNAL)

    queued.create("first", 4, queue=queue, run_policy={"suspend": False})
    queued.running_pods("first", 4)
    wait_for(lambda: _true(queued, "first", "PodsReady"), message="PodsReady on first's Workload")
    queued.create("second", 4, queue=queue, run_policy={"suspend": False})
    _owned_by_the_job(queued, "second")
    verdict = wait_for(
        lambda: queued.pending_for_quota("second"), message="Kueue to hold the second job"
    )
    assert "insufficient" in verdict["message"], verdict
    assert queued.suspended("second")
    assert queued.pods("second") == {}
    assert queued.services("second") == {}
    assert not _true(queued, "second", "Admitted")

    queued.end_pods("first")
    queued.wait_condition("first", "Succeeded")
    wait_for(lambda: _true(queued, "second", "Admitted"), message="Kueue to admit second")
    queued.running_pods("second", 4)
    assert not queued.suspended("second")
    queued.end_pods("second")
    queued.wait_condition("second", "Succeeded")
    wait_for(lambda: _true(queued, "second", "Finished"), message="second's Workload Finished")


@every_kind
def test_preemption_suspends_the_low_job_and_it_resumes_to_success(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    nodes.add(2, cpu="4", ephemeral_storage=NODE_DISK)
    low = queues.priority_class("low", 100)
    high = queues.priority_class("high", 1000)
    queue = queues.queue(cpu="4", preemption={"withinClusterQueue": "LowerPriority"})
    operators.start(EXTERNAL)

    queued.create("low", 4, queue=queue, priority=low, run_policy={"suspend": False})
    queued.running_pods("low", 4)
    queued.wait_condition("low", "Running")
    assert queued.workload("low")["spec"]["priority"] == 100  # type: ignore[index]
    restarts = queued.get("low")["status"].get("restartCount", 0)

    queued.create("high", 4, queue=queue, priority=high, run_for="2s")
    wait_for(lambda: queued.suspended("low"), timeout=20, message="tfjob to suspend low")
    wait_for(lambda: queued.pods("low") == {}, timeout=10, message="low's pods deleted")
    evicted = workload_condition(queued.workload("low"), "Evicted")
    assert evicted is not None and evicted["status"] == "True", evicted
    assert evicted["reason"] == "Preempted", evicted
    assert queued.wait_condition("low", "Suspended", timeout=10)
    assert queued.condition("low", "Running") is None

    queued.running_pods("high", 4)
    queued.wait_condition("high", "Succeeded")
    wait_for(lambda: _true(queued, "high", "Finished"), message="high's Workload Finished")
    wait_for(lambda: not queued.suspended("low"), timeout=30, message="low re-admitted")
    assert _true(queued, "low", "Admitted")
    queued.running_pods("low", 4)
    queued.end_pods("low")
    queued.wait_condition("low", "Succeeded")
    status = queued.get("low")["status"]
    assert status.get("restartCount", 0) == restarts
    assert not any(c["type"] in ("Failed", "Restarting") for c in status["conditions"])
    wait_for(lambda: _true(queued, "low", "Finished"), message="low's Workload Finished")


@every_kind
def test_a_waiting_job_resized_gets_its_workload_rewritten_and_admitted(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """A job waiting for quota changes its replicas: tfjob rewrites its Workload's
    podSets (Kueue allows that while the Workload holds no quota) and Kueue admits
    the smaller job into the room left."""
    nodes.add(2, cpu="4", ephemeral_storage=NODE_DISK)
    queue = queues.queue(cpu="6")
    operators.start(EXTERNAL)

    queued.create("first", 4, queue=queue, run_policy={"suspend": False})
    queued.running_pods("first", 4)
    queued.create("second", 4, queue=queue, run_policy={"suspend": False})
    wait_for(lambda: queued.pending_for_quota("second"), message="Kueue to hold second")
    before = _owned_by_the_job(queued, "second")

    replicas = {
        rtype: {"replicas": 1}
        for rtype in queued.get("second")["spec"][queued.framework.spec_field]
    }
    status, body = queued.patch("second", {"spec": {queued.framework.spec_field: replicas}})
    assert status == 200, body
    wait_for(lambda: _true(queued, "second", "Admitted"), message="Kueue to admit second")
    after = _owned_by_the_job(queued, "second")
    assert sum(ps["count"] for ps in after["spec"]["podSets"]) == len(replicas)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # rewritten, not remade
    queued.running_pods("second", len(replicas))
    assert len(queued.pods("first")) == 4
    queued.end_pods("second")
    queued.wait_condition("second", "Succeeded")
    queued.end_pods("first")
    queued.wait_condition("first", "Succeeded")


@every_kind
def test_a_running_job_resized_is_stopped_and_requeued_with_a_new_workload(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """An admitted Workload's podSets are immutable (Kueue's webhook): a running job
    that changes its replicas no longer matches it, so tfjob stops the job, deletes
    that Workload and makes a new one, which Kueue admits."""
    nodes.add(2, cpu="4", ephemeral_storage=NODE_DISK)
    queue = queues.queue(cpu="4")
    operators.start(EXTERNAL)

    queued.create("job", 4, queue=queue, run_policy={"suspend": False})
    queued.running_pods("job", 4)
    before = _owned_by_the_job(queued, "job")
    field = queued.framework.spec_field
    replicas = {rtype: {"replicas": 1} for rtype in queued.get("job")["spec"][field]}
    status, body = queued.patch("job", {"spec": {field: replicas}})
    assert status == 200, body

    def renewed() -> dict[str, Any] | None:
        owned = _workloads(queued, "job")  # the old one deleted, its finalizer off
        fresh = len(owned) == 1 and owned[0]["metadata"]["uid"] != before["metadata"]["uid"]
        return owned[0] if fresh and _true(queued, "job", "Admitted") else None

    after = wait_for(renewed, timeout=30, message="a new Workload for job, admitted")
    assert sum(ps["count"] for ps in after["spec"]["podSets"]) == len(replicas)
    queued.running_pods("job", len(replicas))
    queued.end_pods("job")
    queued.wait_condition("job", "Succeeded")
    wait_for(lambda: _true(queued, "job", "Finished"), message="job's Workload Finished")


@pytest.mark.parametrize("kind", ["MPIJob"])
def test_an_mpijob_gets_its_launcher_objects_and_hostfile_only_once_admitted(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """An MPIJob's Workload has a launcher and a worker podSet, in Kueue's order. Its
    launcher's ConfigMap (hostfile, discover_hosts.sh), ServiceAccount, Role and
    RoleBinding are made only once Kueue admits it: a job waiting for quota holds
    nothing, and the hostfile names the workers that will run."""
    nodes.add(2, cpu="4", ephemeral_storage=NODE_DISK)
    queue = queues.queue(cpu="4")
    operators.start(EXTERNAL)

    queued.create("first", 4, queue=queue, run_policy={"suspend": False})
    queued.running_pods("first", 4)
    queued.create("second", 3, queue=queue, run_policy={"suspend": False})
    wait_for(lambda: queued.pending_for_quota("second"), message="Kueue to hold second")
    workload = _owned_by_the_job(queued, "second")
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("launcher", 1),
        ("worker", 2),
    ]
    assert queued.pods("second") == {}
    assert _launcher_objects(queued, "second") == {}

    queued.end_pods("first")
    queued.wait_condition("first", "Succeeded")
    wait_for(lambda: _true(queued, "second", "Admitted"), message="Kueue to admit second")
    pods = queued.running_pods("second", 3)
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in pods.values()} == {
        "launcher",
        "worker",
    }
    made = wait_for(
        lambda: (found := _launcher_objects(queued, "second")) and len(found) == 4 and found,
        message="second's launcher objects",
    )
    assert set(made) == {
        "configmaps/second-config",
        "serviceaccounts/second-launcher",
        "roles/second-launcher",
        "rolebindings/second-launcher",
    }
    data = made["configmaps/second-config"]["data"]
    assert data["hostfile"] == "second-worker-0 slots=1\nsecond-worker-1 slots=1\n"
    wait_for(
        lambda: (
            "second-worker-1:1"
            in _launcher_objects(queued, "second")["configmaps/second-config"]["data"][
                "discover_hosts.sh"
            ]
        ),
        message="discover_hosts.sh to name the running workers",
    )
    queued.end_pods("second")
    queued.wait_condition("second", "Succeeded")


def _launcher_objects(queued: QueuedJobs, name: str) -> dict[str, dict[str, Any]]:
    """The MPIJob's own objects besides pods, by resource/name (only those there)."""
    found = {}
    for api, resource, suffix in (
        ("/api/v1", "configmaps", "config"),
        ("/api/v1", "serviceaccounts", "launcher"),
        ("/apis/rbac.authorization.k8s.io/v1", "roles", "launcher"),
        ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", "launcher"),
    ):
        path = f"{api}/namespaces/{queued.namespace}/{resource}/{name}-{suffix}"
        status, body = queued.plane.request("GET", path)
        if status == 200:
            found[f"{resource}/{name}-{suffix}"] = body
        else:
            assert status == 404, body
    return found


SPOT_TAINT = "tfjob.test/spot"


@pytest.mark.parametrize("kind", ["PyTorchJob"])
def test_the_flavours_taint_tolerations_and_labels_place_the_pods_and_go_on_eviction(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """The flavour's nodes are tainted: only pods with its toleration fit there, and
    only its node selector keeps them off the roomy plain node. tfjob puts both in the
    pods it makes, never in the stored job: once preempted the job holds neither, and
    its pods made again on re-admission carry them once."""
    taint = {"key": SPOT_TAINT, "value": "true", "effect": "NoSchedule"}
    spot = nodes.add(
        2, cpu="2", labels={POOL_LABEL: "spot"}, taints=[taint], ephemeral_storage=NODE_DISK
    )
    nodes.add(1, cpu="8", ephemeral_storage=NODE_DISK)
    toleration = {"key": SPOT_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    flavor = queues.flavor("spot", nodeLabels={POOL_LABEL: "spot"}, tolerations=[toleration])
    low = queues.priority_class("low", 100)
    high = queues.priority_class("high", 1000)
    queue = queues.queue(cpu="4", flavor=flavor, preemption={"withinClusterQueue": "LowerPriority"})
    operators.start(EXTERNAL)

    def placed(name: str) -> None:
        for pod_name, pod in queued.running_pods(name, 4).items():
            assert pod["spec"]["nodeSelector"] == {POOL_LABEL: "spot"}, pod_name
            assert pod["spec"]["tolerations"].count(toleration) == 1, pod_name
            assert pod["spec"]["nodeName"] in spot, pod_name

    def templates(name: str) -> list[dict[str, Any]]:
        specs = queued.get(name)["spec"][queued.framework.spec_field]
        return [spec["template"]["spec"] for spec in specs.values()]

    queued.create("low", 4, queue=queue, priority=low, run_policy={"suspend": False})
    written = templates("low")
    placed("low")
    assert templates("low") == written
    assert not any("nodeSelector" in t or "tolerations" in t for t in written), written

    queued.create("high", 4, queue=queue, priority=high, run_for="2s")
    wait_for(lambda: queued.suspended("low"), timeout=20, message="tfjob to suspend low")
    wait_for(lambda: queued.pods("low") == {}, timeout=10, message="low's pods deleted")
    assert templates("low") == written
    placed("high")
    queued.wait_condition("high", "Succeeded")
    wait_for(lambda: not queued.suspended("low"), timeout=30, message="low re-admitted")
    placed("low")
    assert templates("low") == written
    queued.end_pods("low")
    queued.wait_condition("low", "Succeeded")


V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1"


def _create_pod_priority_class(queues: Queues, stem: str, value: int) -> str:
    """A scheduling.k8s.io PriorityClass (cluster-scoped: named uniquely, deleted
    after the test)."""
    name = queues.unique(stem)
    queues.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value},
    )  # fmt: skip
    return name


@pytest.mark.parametrize("kind", ["TFJob"])
def test_the_workload_priority_comes_from_the_label_else_the_pods_priority_class(
    queued: QueuedJobs, queues: Queues, operators: Operators
) -> None:
    """As Kueue's jobframework resolves it: the WorkloadPriorityClass of the job's
    kueue.x-k8s.io/priority-class label wins; without the label, the PriorityClass a
    replica template names; with neither (and no globalDefault class), priority 0
    and no class. v1beta1's view of the same Workload names the class and its source."""
    labelled = queues.priority_class("wpc", 300)
    pod_class = _create_pod_priority_class(queues, "pc", 700)
    queue = queues.queue(cpu="1")  # holds nothing: no node runs the pods either
    operators.start(EXTERNAL)

    def with_pod_class(name: str, priority: str | None) -> dict[str, Any]:
        manifest = queued.manifest(name, 1, queue=queue, priority=priority)
        for spec in manifest["spec"][queued.framework.spec_field].values():
            spec["template"]["spec"]["priorityClassName"] = pod_class
        return manifest

    queued.submit(with_pod_class("both", labelled))
    queued.submit(with_pod_class("pods", None))
    queued.create("none", 1, queue=queue)
    wanted = {
        "both": (300, {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                       "name": labelled},
                 (labelled, "kueue.x-k8s.io/workloadpriorityclass")),
        "pods": (700, {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pod_class},
                 (pod_class, "scheduling.k8s.io/priorityclass")),
        "none": (0, None, (None, None)),
    }  # fmt: skip
    for name, (value, ref, (class_name, source)) in wanted.items():
        workload = _owned_by_the_job(queued, name)
        assert workload["spec"]["priority"] == value, name
        assert workload["spec"].get("priorityClassRef") == ref, name
        path = f"{V1BETA1}/namespaces/{queued.namespace}/workloads/{workload['metadata']['name']}"
        status, old = queued.plane.request("GET", path)
        assert status == 200, old
        assert old["spec"]["priority"] == value, name
        assert old["spec"].get("priorityClassName") == class_name, name
        assert old["spec"].get("priorityClassSource", "") == (source or ""), name


GANG = ("--gang-scheduler-name", "default-scheduler")


def _gang_sizes(queued: QueuedJobs, name: str) -> list[int]:
    """The minCount of the job's native gang Workload and PodGroup, in that order."""
    sizes = []
    for resource in ("workloads", "podgroups"):
        status, body = queued.plane.request(
            "GET", f"{GANG_API}/namespaces/{queued.namespace}/{resource}/{name}"
        )
        assert status == 200, body
        spec = body["spec"]
        policy = spec["podGroupTemplates"][0] if resource == "workloads" else spec
        sizes.append(policy["schedulingPolicy"]["gang"]["minCount"])
    return sizes


@pytest.mark.parametrize("kind", ["PyTorchJob"])
def test_gang_groups_come_on_admission_with_the_admitted_sizes_and_place_whole(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """With the operator's native gang scheduling: a job waiting for quota has no gang
    group (nor pods). An elastic job Kueue admits in part (2 of its 3 Workers) gets a
    group of the admitted size, and the scheduler places that gang whole or not at
    all: the nodes have room for 5 pods, the first job holds 4, so none of the second
    job's pods is bound until the first ends."""
    nodes.add(1, cpu="4", ephemeral_storage=NODE_DISK)
    nodes.add(1, cpu="1", ephemeral_storage=NODE_DISK)
    queue = queues.queue(cpu="6")
    operators.start(EXTERNAL, *GANG)

    queued.create("one", 4, queue=queue, run_policy={"suspend": False})
    queued.running_pods("one", 4)
    assert _gang_sizes(queued, "one") == [4, 4]

    waiting = queued.manifest("waiting", 4, queue=queue, run_policy={"suspend": False})
    queued.submit(waiting)
    wait_for(lambda: queued.pending_for_quota("waiting"), message="Kueue to hold waiting")
    assert queued.gang_groups("waiting") == []
    assert queued.pods("waiting") == {}
    status, body = queued.plane.request("DELETE", f"{queued.path}/waiting")
    assert status == 200, body

    elastic = queued.manifest("elastic", 3, queue=queue, run_policy={"suspend": False})
    specs = elastic["spec"]["pytorchReplicaSpecs"]
    specs.pop("Master")
    specs["Worker"]["replicas"] = 3
    elastic["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    queued.submit(elastic)
    wait_for(lambda: _true(queued, "elastic", "Admitted"), message="Kueue to admit elastic")
    admission = queued.workload("elastic")["status"]["admission"]  # type: ignore[index]
    assert [ps["count"] for ps in admission["podSetAssignments"]] == [2], admission
    # The native gang's Workload, then its PodGroup: both, not just the first made.
    wait_for(lambda: len(queued.gang_groups("elastic")) == 2, message="elastic's gang groups")
    assert _gang_sizes(queued, "elastic") == [2, 2]
    wait_for(lambda: len(queued.pods("elastic")) == 2, message="elastic's 2 pods")

    def bound(job: str) -> int:
        return sum(1 for p in queued.pods(job).values() if p["spec"].get("nodeName"))

    # One CPU is free: room for one of elastic's pods, not its gang.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert bound("elastic") == 0, "part of elastic's gang was bound"
        time.sleep(0.2)
    queued.end_pods("one")
    queued.wait_condition("one", "Succeeded")
    pods = queued.running_pods("elastic", 2)
    for pod in pods.values():
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "elastic"}
    queued.end_pods("elastic")
    queued.wait_condition("elastic", "Succeeded")


@pytest.mark.parametrize("kind", ["TFJob"])
def test_a_job_managed_by_another_controller_gets_no_workload_from_tfjob(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """A queued job whose runPolicy.managedBy names MultiKueue is not tfjob's: no
    Workload (MultiKueue's manager would have Kueue's made), no pods, no status. One
    that names tfjob's own value (kubeflow.org/training-operator) is queued as usual;
    once it runs, the operator has long seen the other (it watches in order)."""
    nodes.add(1, cpu="4", ephemeral_storage=NODE_DISK)
    queue = queues.queue(cpu="4")
    operators.start(EXTERNAL)

    elsewhere = {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": False}
    queued.create("elsewhere", 2, queue=queue, run_policy=elsewhere)
    ours = {"managedBy": "kubeflow.org/training-operator", "suspend": False}
    queued.create("ours", 2, queue=queue, run_policy=ours)
    _owned_by_the_job(queued, "ours")
    queued.running_pods("ours", 2)
    queued.wait_condition("ours", "Running")
    time.sleep(1)  # and a margin for a late write
    assert _workloads(queued, "elsewhere") == []
    assert queued.pods("elsewhere") == {}
    stored = queued.get("elsewhere")
    assert stored["spec"]["runPolicy"]["suspend"] is False
    assert not (stored.get("status") or {}).get("conditions"), stored.get("status")
    queued.end_pods("ours")
    queued.wait_condition("ours", "Succeeded")
