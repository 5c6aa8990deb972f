"""Gang scheduling end to end: the operator with ``--gang-scheduler-name`` on the cluster.

Native Kubernetes gang scheduling runs for real here: kube-scheduler v1.36 with its
GangScheduling plugin binds pods to kwok nodes sized so that exactly 3 one-CPU workers
fit. Volcano, kube-batch and scheduler-plugins do not build here, so for them the
operator's objects are checked against their PodGroup CRDs (testkit/crds/, which
prune any field their API does not have): the group, the annotations, labels,
scheduler names and events, and Volcano's hold on pod creation.

While a gang cannot fit, kube-scheduler retries it in a tight loop (over one core):
those phases are kept to a couple of seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, Cluster, Nodes
from testkit.controlplane import REPO_ROOT, ControlPlane, apply_documents, load_manifest
from testkit.helpers import IMAGE, wait_for
from testkit.operators import Jobs, Operators

CRDS = REPO_ROOT / "testkit" / "crds"
UNFIT_WAIT = 2.0  # seconds a gang is left unschedulable before the test checks it


def _workers(
    count: int, *, ends: bool = True, container_name: str = "tensorflow", **template_spec: Any
) -> dict[str, Any]:
    """`count` workers of one CPU each; with `ends`, kwok ends them 1 s after start."""
    annotations = {EXIT_CODE_ANNOTATION: "0", RUN_FOR_ANNOTATION: "1s"} if ends else {}
    resources = {"requests": {"cpu": "1"}}
    container = {"name": container_name, "image": IMAGE, "resources": resources}
    return {
        "replicas": count,
        "restartPolicy": "Never",
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {"containers": [container], **template_spec},
        },
    }


def _raw_pods(plane: ControlPlane, namespace: str) -> dict[str, dict[str, Any]]:
    """Pods as the API server stores them (every field, spec.schedulingGroup included)."""
    status, body = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, body
    return {p["metadata"]["name"]: p for p in body["items"]}


def _bound(plane: ControlPlane, namespace: str, job: str) -> int:
    return sum(
        1
        for name, p in _raw_pods(plane, namespace).items()
        if name.startswith(f"{job}-") and p["spec"].get("nodeName")
    )


def _pods_of(plane: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    return [p for n, p in _raw_pods(plane, namespace).items() if n.startswith(f"{job}-")]


def _get(plane: ControlPlane, path: str) -> dict[str, Any] | None:
    status, body = plane.request("GET", path)
    if status == 404:
        return None
    assert status == 200, body
    found: dict[str, Any] = body
    return found


# -- native Kubernetes, on the real scheduler -----------------------------------------


@pytest.fixture
def native(operators: Operators, nodes: Nodes) -> Operators:
    """An operator with native gang scheduling, and one node with room for 3 workers."""
    nodes.add(1, cpu="3")
    operators.start("--gang-scheduler-name", "default-scheduler")
    return operators


def test_native_gang_binds_no_pod_until_all_fit_then_runs_to_success(
    native: Operators, nodes: Nodes, jobs: Jobs, control_plane: ControlPlane, namespace: str
) -> None:
    jobs.create("gang", {"Worker": _workers(4)})
    wait_for(lambda: len(_pods_of(control_plane, namespace, "gang")) == 4, message="4 pods")
    time.sleep(UNFIT_WAIT)
    assert _bound(control_plane, namespace, "gang") == 0
    assert jobs.condition("gang", "Running") is None

    workload = _get(
        control_plane, f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/workloads/gang"
    )
    group = _get(
        control_plane, f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/gang"
    )
    assert workload is not None and group is not None
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    for pod in _pods_of(control_plane, namespace, "gang"):
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang"}
        assert pod["spec"]["schedulerName"] == "default-scheduler"

    nodes.add(1, cpu="1")
    wait_for(
        lambda: _bound(control_plane, namespace, "gang") == 4,
        timeout=5,
        message="all 4 pods bound within 5 s of the new node",
    )
    jobs.wait_condition("gang", "Succeeded", timeout=30)


@pytest.mark.usefixtures("pytorchjob_crd_installed")
def test_a_pytorchjob_gang_is_placed_whole(
    native: Operators, nodes: Nodes, jobs: Jobs, control_plane: ControlPlane, namespace: str
) -> None:
    """Gang scheduling is every kind's: a Master and 3 Workers wait for room for 4."""
    from tfjob.frameworks.pytorch import PYTORCH

    pytorch = jobs.of(PYTORCH)
    one = _workers(1, container_name="pytorch")
    pytorch.create("ddp", {"Master": one, "Worker": {**one, "replicas": 3}})
    wait_for(lambda: len(_pods_of(control_plane, namespace, "ddp")) == 4, message="4 pods")
    time.sleep(UNFIT_WAIT)
    assert _bound(control_plane, namespace, "ddp") == 0
    group = _get(
        control_plane, f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/ddp"
    )
    assert group is not None
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"

    nodes.add(1, cpu="1")
    wait_for(lambda: _bound(control_plane, namespace, "ddp") == 4, message="all 4 pods bound")
    pytorch.wait_condition("ddp", "Succeeded", timeout=30)


def test_without_gang_three_pods_are_bound_and_one_waits(
    operators: Operators, nodes: Nodes, jobs: Jobs, control_plane: ControlPlane, namespace: str
) -> None:
    """The stuck half-job gang scheduling prevents: 3 workers placed, idle, 1 Pending."""
    nodes.add(1, cpu="3")
    operators.start()
    jobs.create("half", {"Worker": _workers(4, ends=False)})
    wait_for(lambda: _bound(control_plane, namespace, "half") == 3, message="3 pods bound")
    time.sleep(1)
    pods = _pods_of(control_plane, namespace, "half")
    assert len(pods) == 4
    waiting = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(waiting) == 1
    assert waiting[0]["status"]["phase"] == "Pending"
    scheduled = next(c for c in waiting[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert all("schedulingGroup" not in p["spec"] for p in pods)


def test_two_gangs_with_room_for_one_run_one_after_the_other(
    operators: Operators, nodes: Nodes, jobs: Jobs, control_plane: ControlPlane, namespace: str
) -> None:
    nodes.add(1, cpu="4")
    operators.start("--gang-scheduler-name", "default-scheduler")
    jobs.create("first", {"Worker": _workers(4)})
    jobs.create("second", {"Worker": _workers(4)})

    def placed() -> str | None:
        # Room for 4: pods of both jobs bound at once would mean a split gang. (One
        # gang's 4 bindings are written one by one, so 1-3 of them show briefly.)
        counts = {j: _bound(control_plane, namespace, j) for j in ("first", "second")}
        assert min(counts.values()) == 0, f"both gangs have pods bound: {counts}"
        return next((j for j, n in counts.items() if n == 4), None)

    winner = wait_for(placed, timeout=20, message="one whole gang bound")
    other = "second" if winner == "first" else "first"

    def winner_done() -> bool:
        # One list, one consistent snapshot: the other gang has no pod bound for as
        # long as any of the winner's pods still holds its CPU.
        pods = _raw_pods(control_plane, namespace)
        done = [
            p["status"].get("phase") == "Succeeded"
            for n, p in pods.items()
            if n.startswith(f"{winner}-")
        ]
        bound = [
            n for n, p in pods.items() if n.startswith(f"{other}-") and p["spec"].get("nodeName")
        ]
        assert all(done) or not bound, f"{other} got pods {bound} while {winner} was running"
        return len(done) == 4 and all(done)

    wait_for(winner_done, timeout=20, message=f"{winner}'s pods to finish")
    jobs.wait_condition(winner, "Succeeded", timeout=20)
    wait_for(lambda: _bound(control_plane, namespace, other) == 4, timeout=10, message="second")
    jobs.wait_condition(other, "Succeeded", timeout=30)


def test_the_groups_go_with_the_job(
    native: Operators, jobs: Jobs, control_plane: ControlPlane, namespace: str
) -> None:
    jobs.create("short", {"Worker": _workers(2)})
    path = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/short"
    wait_for(lambda: _get(control_plane, path), message="the PodGroup")
    jobs.wait_condition("short", "Succeeded", timeout=30)
    # A finished job gives its groups back (the podgroup-protection finalizer lets the
    # PodGroup go once its pods are no longer scheduled).
    wait_for(lambda: _get(control_plane, path) is None, timeout=20, message="PodGroup deleted")
    workload = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/workloads/short"
    assert _get(control_plane, workload) is None
    running = native.started[0]
    assert running.metric("created_pod_groups_total") == 1
    assert running.metric("deleted_pod_groups_total") == 1


# -- Volcano, kube-batch, scheduler-plugins: their CRDs as fixtures --------------------


def _crd_name(file: str) -> str:
    return str(load_manifest(CRDS / file)[0]["metadata"]["name"])


def _install(kube: Client, file: str) -> None:
    apply_documents(kube, load_manifest(CRDS / file))
    name = _crd_name(file)

    def established() -> bool:
        crd = kube.get(CustomResourceDefinition, name)
        conditions = (crd.status.conditions if crd.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, message=f"CRD {name} Established")


@pytest.fixture
def volcano_crd(kube: Client, cluster: Cluster) -> Iterator[None]:
    _install(kube, "volcano-podgroup.yaml")
    yield


@pytest.fixture
def kube_batch_crd(kube: Client, cluster: Cluster) -> Iterator[None]:
    _install(kube, "kube-batch-podgroup.yaml")
    yield


@pytest.fixture
def plugins_crd(kube: Client, cluster: Cluster) -> Iterator[None]:
    _install(kube, "scheduler-plugins-podgroup.yaml")
    yield


def _group(plane: ControlPlane, api: str, namespace: str, name: str) -> dict[str, Any] | None:
    return _get(plane, f"/apis/{api}/namespaces/{namespace}/podgroups/{name}")


def test_volcano_pod_group_and_pods_wait_for_admission(
    volcano_crd: None,
    operators: Operators,
    jobs: Jobs,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    operators.start("--gang-scheduler-name", "volcano")
    specs = {"Worker": _workers(2, ends=False), "PS": _workers(1, ends=False)}
    jobs.create(
        "vc",
        specs,
        runPolicy={"schedulingPolicy": {"queue": "research", "minAvailable": 2}},
    )
    api = "scheduling.volcano.sh/v1beta1"
    group = wait_for(lambda: _group(control_plane, api, namespace, "vc"), message="PodGroup")
    assert group["spec"] == {
        "minMember": 2,
        "queue": "research",
        "minResources": {"cpu": "2"},
    }
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TFJob", "vc", True)
    time.sleep(1.5)
    assert _pods_of(control_plane, namespace, "vc") == [], "pods created before admission"

    # What Volcano's controller does once the queue has room.
    status, body = control_plane.request(
        "PATCH",
        f"/apis/{api}/namespaces/{namespace}/podgroups/vc",
        body={"status": {"phase": "Inqueue"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, body
    wait_for(lambda: len(_pods_of(control_plane, namespace, "vc")) == 3, message="3 pods")
    for pod in _pods_of(control_plane, namespace, "vc"):
        rtype = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"]
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "vc"
        assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == rtype


def test_kube_batch_pod_group_and_the_seed_warning(
    kube_batch_crd: None,
    operators: Operators,
    jobs: Jobs,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    operators.start("--gang-scheduler-name", "kube-batch")
    specs = {
        "Worker": _workers(3, ends=False),
        "PS": _workers(1, ends=False, schedulerName="my-scheduler"),
    }
    jobs.create("kb", specs)
    api = "scheduling.incubator.k8s.io/v1alpha1"
    group = wait_for(lambda: _group(control_plane, api, namespace, "kb"), message="PodGroup")
    assert group["spec"] == {"minMember": 4}
    pods = wait_for(
        lambda: p if len(p := _pods_of(control_plane, namespace, "kb")) == 4 else None,
        message="4 pods",
    )
    names = {p["metadata"]["name"]: p["spec"]["schedulerName"] for p in pods}
    assert names == {
        "kb-ps-0": "my-scheduler",
        "kb-worker-0": "kube-batch",
        "kb-worker-1": "kube-batch",
        "kb-worker-2": "kube-batch",
    }
    for pod in pods:
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "kb"
    warning = wait_for(
        lambda: next(
            (e for e in jobs.events("kb") if e["reason"] == "SettedPodTemplateSchedulerName"),
            None,
        ),
        message="the scheduler-name warning",
    )
    assert warning["type"] == "Warning"
    assert warning["message"] == (
        "Another scheduler is specified when gang-scheduling is enabled and it will not be "
        "overwritten"
    )


def test_scheduler_plugins_pod_group_label_and_cleanup_with_the_job(
    plugins_crd: None,
    operators: Operators,
    jobs: Jobs,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    operators.start("--gang-scheduler-name", "scheduler-plugins-scheduler")
    jobs.create(
        "sp",
        {"Worker": _workers(2, ends=False)},
        runPolicy={"schedulingPolicy": {"scheduleTimeoutSeconds": 30, "queue": "ignored"}},
    )
    api = "scheduling.x-k8s.io/v1alpha1"
    group = wait_for(lambda: _group(control_plane, api, namespace, "sp"), message="PodGroup")
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "2"},
        "scheduleTimeoutSeconds": 30,
    }
    pods = wait_for(
        lambda: p if len(p := _pods_of(control_plane, namespace, "sp")) == 2 else None,
        message="2 pods",
    )
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "sp"
    assert not any(e["type"] == "Warning" for e in jobs.events("sp"))
    # Owned by the job: the garbage collector removes it with the job. (The collector
    # finds resources added after it started only every 30 s; the `cluster` fixture
    # installs these CRDs before it, hence the slack for a re-created CRD.)
    status, _ = control_plane.request(
        "DELETE", f"/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs/sp"
    )
    assert status == 200
    wait_for(
        lambda: _group(control_plane, api, namespace, "sp") is None,
        timeout=60,
        interval=0.5,
        message="PodGroup collected with its job",
    )


def _spec_is(
    plane: ControlPlane, api: str, namespace: str, name: str, spec: dict[str, Any]
) -> dict[str, Any] | None:
    group = _group(plane, api, namespace, name)
    return group if group is not None and group["spec"] == spec else None


def test_scheduler_plugins_pod_group_follows_scaling_and_min_available(
    plugins_crd: None,
    operators: Operators,
    jobs: Jobs,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    """Scaling the job (or changing minAvailable) updates its PodGroup in place: the
    scheduler must wait for the new number of pods, not the old one."""
    operators.start("--gang-scheduler-name", "scheduler-plugins-scheduler")
    jobs.create("grow", {"Worker": _workers(2, ends=False)})
    api = "scheduling.x-k8s.io/v1alpha1"
    first = wait_for(
        lambda: _spec_is(
            control_plane, api, namespace, "grow", {"minMember": 2, "minResources": {"cpu": "2"}}
        ),
        message="the PodGroup for 2 workers",
    )
    wait_for(lambda: len(_pods_of(control_plane, namespace, "grow")) == 2, message="2 pods")

    jobs.patch_spec("grow", {"tfReplicaSpecs": {"Worker": {"replicas": 4}}})
    scaled = wait_for(
        lambda: _spec_is(
            control_plane, api, namespace, "grow", {"minMember": 4, "minResources": {"cpu": "4"}}
        ),
        timeout=10,
        message="minMember 4 after scaling to 4 workers",
    )
    assert scaled["metadata"]["uid"] == first["metadata"]["uid"], "updated, not re-created"
    wait_for(lambda: len(_pods_of(control_plane, namespace, "grow")) == 4, message="4 pods")

    jobs.patch_spec("grow", {"runPolicy": {"schedulingPolicy": {"minAvailable": 3}}})
    wait_for(
        lambda: _spec_is(
            control_plane, api, namespace, "grow", {"minMember": 3, "minResources": {"cpu": "3"}}
        ),
        timeout=10,
        message="minMember 3 after minAvailable: 3",
    )
    assert not any(e["type"] == "Warning" for e in jobs.events("grow"))


def test_volcano_pod_group_follows_scaling_and_keeps_its_queue(
    volcano_crd: None,
    operators: Operators,
    jobs: Jobs,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    operators.start("--gang-scheduler-name", "volcano")
    jobs.create(
        "vq",
        {"Worker": _workers(2, ends=False)},
        runPolicy={"schedulingPolicy": {"queue": "research"}},
    )
    api = "scheduling.volcano.sh/v1beta1"
    wait_for(lambda: _group(control_plane, api, namespace, "vq"), message="PodGroup")
    # A queueing system moves the group to another queue, and Volcano admits it.
    status, body = control_plane.request(
        "PATCH",
        f"/apis/{api}/namespaces/{namespace}/podgroups/vq",
        body={"spec": {"queue": "night"}, "status": {"phase": "Inqueue"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200, body
    wait_for(lambda: len(_pods_of(control_plane, namespace, "vq")) == 2, message="2 pods")

    jobs.patch_spec("vq", {"tfReplicaSpecs": {"Worker": {"replicas": 3}}})
    group = wait_for(
        lambda: _spec_is(
            control_plane,
            api,
            namespace,
            "vq",
            {"minMember": 3, "queue": "night", "minResources": {"cpu": "3"}},
        ),
        timeout=10,
        message="minMember 3 in the queue the group was moved to",
    )
    assert group["status"]["phase"] == "Inqueue"  # the status Volcano wrote is kept
    wait_for(lambda: len(_pods_of(control_plane, namespace, "vq")) == 3, message="3 pods")


def test_operator_refuses_to_start_without_the_group_api(
    kube: Client, operators: Operators, cluster: Cluster
) -> None:
    """As upstream: without the PodGroup CRD, gang scheduling cannot work; exit 1."""
    name = _crd_name("kube-batch-podgroup.yaml")
    try:
        kube.delete(CustomResourceDefinition, name)
    except ApiError as error:
        if error.status.code != 404:
            raise

    def gone() -> bool:
        try:
            kube.get(CustomResourceDefinition, name)
        except ApiError as error:
            return error.status.code == 404
        return False

    wait_for(gone, message=f"CRD {name} deleted")
    running = operators.start("--gang-scheduler-name", "kube-batch", wait=False)
    assert running.process.wait(timeout=30) == 1
    log = running.log_tail()
    assert "podgroups.scheduling.incubator.k8s.io" in log
