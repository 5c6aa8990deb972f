"""The test cluster itself: what the end-to-end suites rely on, shown with plain pods.

kube-scheduler binds pods to kwok nodes by their requests, kwok runs and ends them as
the annotations ask, the controller-manager garbage-collects owned objects and writes
EndpointSlices, ``kubectl logs`` reaches kwok, and native gang scheduling holds a group
that does not fit. If these fail, the suites built on the cluster mean nothing.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from testkit.cluster import (
    EXIT_CODE_ANNOTATION,
    REASON_ANNOTATION,
    RUN_FOR_ANNOTATION,
    Cluster,
    Nodes,
)
from testkit.controlplane import ControlPlane


def _pod(
    name: str,
    *,
    cpu: str = "100m",
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "tensorflow",
                "image": "tensorflow/tensorflow:2.16.1",
                "resources": {"requests": {"cpu": cpu}},
            }
        ],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    metadata: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    metadata["labels"] = labels or {}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _create(plane: ControlPlane, namespace: str, path: str, body: dict[str, Any]) -> Any:
    status, created = plane.request("POST", f"/{path}".replace("NS", namespace), body=body)
    assert status == 201, created
    return created


def _wait(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _pods(kube: Client, namespace: str) -> dict[str, Pod]:
    return {p.metadata.name: p for p in kube.list(Pod, namespace=namespace)}  # type: ignore[union-attr,misc]


def _phase(kube: Client, namespace: str, name: str) -> str:
    pod = kube.get(Pod, name, namespace=namespace)
    return pod.status.phase if pod.status else ""  # type: ignore[return-value]


def _terminated(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    pod = kube.get(Pod, name, namespace=namespace).to_dict()
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def test_pods_are_scheduled_run_and_end_with_the_exit_code_asked(
    control_plane: ControlPlane, kube: Client, nodes: Nodes, namespace: str
) -> None:
    nodes.add(1, cpu="2")
    _create(control_plane, namespace, "api/v1/namespaces/NS/pods", _pod("server"))
    _create(
        control_plane,
        namespace,
        "api/v1/namespaces/NS/pods",
        _pod("ok", annotations={EXIT_CODE_ANNOTATION: "0", RUN_FOR_ANNOTATION: "300ms"}),
    )
    _create(
        control_plane,
        namespace,
        "api/v1/namespaces/NS/pods",
        _pod("oom", annotations={EXIT_CODE_ANNOTATION: "137", REASON_ANNOTATION: "OOMKilled"}),
    )
    _wait("ok to succeed", lambda: _phase(kube, namespace, "ok") == "Succeeded")
    _wait("oom to fail", lambda: _phase(kube, namespace, "oom") == "Failed")
    _wait("server to run", lambda: _phase(kube, namespace, "server") == "Running")
    pods = _pods(kube, namespace)
    assert all(p.spec.nodeName == nodes.names[0] for p in pods.values())  # type: ignore[union-attr]
    assert pods["server"].status.podIP  # type: ignore[union-attr]
    assert _terminated(kube, namespace, "ok")["exitCode"] == 0
    oom = _terminated(kube, namespace, "oom")
    assert (oom["exitCode"], oom["reason"]) == (137, "OOMKilled")
    # A running pod ends when told to, later.
    kube.patch(
        Pod,
        "server",
        {"metadata": {"annotations": {EXIT_CODE_ANNOTATION: "1"}}},
        namespace=namespace,
    )
    _wait("server to fail", lambda: _phase(kube, namespace, "server") == "Failed")
    assert _terminated(kube, namespace, "server")["exitCode"] == 1


def test_requests_beyond_the_nodes_leave_pods_pending(
    control_plane: ControlPlane, kube: Client, nodes: Nodes, namespace: str
) -> None:
    nodes.add(1, cpu="1")
    for i in range(3):
        _create(control_plane, namespace, "api/v1/namespaces/NS/pods", _pod(f"p{i}", cpu="400m"))
    _wait(
        "two pods bound",
        lambda: sum(bool(p.spec.nodeName) for p in _pods(kube, namespace).values()) == 2,
    )  # type: ignore[union-attr]
    time.sleep(1)
    assert sum(bool(p.spec.nodeName) for p in _pods(kube, namespace).values()) == 2  # type: ignore[union-attr]


def test_garbage_collector_endpointslices_and_logs(
    control_plane: ControlPlane,
    cluster: Cluster,
    kube: Client,
    nodes: Nodes,
    namespace: str,
    kubeconfig: Path,
) -> None:
    nodes.add(1)
    owner = _create(
        control_plane,
        namespace,
        "api/v1/namespaces/NS/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    _create(
        control_plane,
        namespace,
        "api/v1/namespaces/NS/pods",
        _pod("owned", owner=ref, labels={"app": "x"}),
    )
    _create(
        control_plane,
        namespace,
        "api/v1/namespaces/NS/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "x"},
            "spec": {"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"port": 2222}]},
        },
    )
    _wait("owned to run", lambda: _phase(kube, namespace, "owned") == "Running")
    ip = kube.get(Pod, "owned", namespace=namespace).status.podIP  # type: ignore[union-attr]

    def slice_has_ip() -> bool:
        _, slices = control_plane.request(
            "GET",
            f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
            "?labelSelector=kubernetes.io%2Fservice-name%3Dx",
        )
        return any(
            ip in e.get("addresses", []) for s in slices["items"] for e in s.get("endpoints") or []
        )

    _wait("an EndpointSlice with the pod's IP", slice_has_ip)

    cluster.write_container_log(["hello from kwok", "second line"])
    kubectl = control_plane.assets.tool("kubectl")
    out = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", "-n", namespace, "logs", "owned"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["hello from kwok", "second line"]

    status, _ = control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/owner")
    assert status == 200
    _wait("the owned pod to be collected", lambda: "owned" not in _pods(kube, namespace))


def _pod_group(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def test_native_gang_is_bound_whole_or_not_at_all(
    control_plane: ControlPlane, kube: Client, nodes: Nodes, namespace: str
) -> None:
    """Room for 3 of a gang of 4: none bound; one more node: all 4 within 5 s."""
    nodes.add(1, cpu="3")
    _create(
        control_plane,
        namespace,
        "apis/scheduling.k8s.io/v1alpha2/namespaces/NS/podgroups",
        _pod_group("gang", 4),
    )
    for i in range(4):
        _create(
            control_plane,
            namespace,
            "api/v1/namespaces/NS/pods",
            _pod(f"g{i}", cpu="1", group="gang"),
        )
    time.sleep(2)  # short: the scheduler retries an unfit gang in a tight loop
    assert not any(p.spec.nodeName for p in _pods(kube, namespace).values())  # type: ignore[union-attr]
    nodes.add(1, cpu="1")
    _wait(
        "all four bound",
        lambda: all(p.spec.nodeName for p in _pods(kube, namespace).values()),  # type: ignore[union-attr]
        timeout=5,
    )
