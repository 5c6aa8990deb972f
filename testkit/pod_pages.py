"""Capture the pod list pages of tests/fixtures/pods from a real kube-apiserver.

    KUBEBUILDER_ASSETS=$(tools/envtest/build.sh | tail -n 1) python3 -m testkit.pod_pages

starts etcd and kube-apiserver (testkit/controlplane.py), makes the pods of
`PODS` in namespace `fixtures` (running, failed with exit codes, waiting, with init
containers, owner references, deletion timestamps), and writes what the API server
answers, all at one resourceVersion (`resourceVersionMatch=Exact`):

- `pods.json`, `pods.pb`: every pod, as JSON and as protobuf;
- `page.json`, `page.pb`: the first `PAGE` pods, with a continue token.

tests/kubernetes/operator/test_pod_proto.py decodes them offline: the two formats
must make the same projections and the same continue token. Re-capture when the
projection reads a new field, so the pages hold it.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

from testkit.controlplane import ControlPlane

HERE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pods"
NAMESPACE = "fixtures"
PAGE = 5
PROTOBUF = "application/vnd.kubernetes.protobuf"
NOW = "2026-12-01T10:00:00Z"
HOLD = "tfjob.test/hold"  # a finalizer that keeps a deleted pod, with its deletionTimestamp


def _container(name: str, **state: Any) -> dict[str, Any]:
    return {"name": name, "image": "tf", "imageID": "", "ready": False, "restartCount": 0, **state}


def _terminated(code: int, reason: str, message: str = "") -> dict[str, Any]:
    done = {"exitCode": code, "reason": reason, "startedAt": NOW, "finishedAt": NOW}
    return {"terminated": {**done, **({"message": message} if message else {})}}


RUNNING = {"running": {"startedAt": NOW}}

# name -> (metadata beyond name and labels, status); "owner": a controller reference.
PODS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "pending": ({}, {"phase": "Pending"}),
    "running": (
        {"owner": True},
        {
            "phase": "Running",
            "containerStatuses": [_container("tensorflow", state=RUNNING, restartCount=2)],
            "initContainerStatuses": [_container("init", state=_terminated(0, "Completed"))],
        },
    ),
    "evicted": (
        {"owner": True},
        {
            "phase": "Failed",
            "reason": "Evicted",
            "message": "The node was low on resource: memory.",
            "containerStatuses": [
                _container("tensorflow", state=_terminated(137, "OOMKilled", "out of memory"))
            ],
        },
    ),
    "failed-exit-1": (
        {"owner": True},
        {
            "phase": "Failed",
            "containerStatuses": [_container("tensorflow", state=_terminated(1, "Error"))],
            "initContainerStatuses": [_container("init", state=_terminated(0, "Completed"))],
        },
    ),
    "succeeded": (
        {"owner": True},
        {
            "phase": "Succeeded",
            "containerStatuses": [_container("tensorflow", state=_terminated(0, "Completed"))],
        },
    ),
    "image-pull": (
        {},
        {
            "phase": "Pending",
            "containerStatuses": [
                _container(
                    "tensorflow",
                    state={"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}},
                )
            ],
        },
    ),
    "crash-loop": (
        {"owner": True},
        {
            "phase": "Running",
            "containerStatuses": [
                _container(
                    "tensorflow",
                    state={"waiting": {"reason": "CrashLoopBackOff"}},
                    lastState=_terminated(2, "Error"),
                    restartCount=5,
                )
            ],
        },
    ),
    "init-waiting": (
        {},
        {
            "phase": "Pending",
            "containerStatuses": [
                _container("tensorflow", state={"waiting": {"reason": "PodInitializing"}})
            ],
            "initContainerStatuses": [_container("init", state=RUNNING)],
        },
    ),
    "sidecar-failed": (
        {"owner": True},
        {
            "phase": "Running",
            "containerStatuses": [
                _container("tensorflow", state=RUNNING),
                _container("sidecar", state=_terminated(2, "Error", "sidecar gave up")),
            ],
        },
    ),
    "unknown-no-labels": ({"labels": None}, {"phase": "Unknown", "reason": "NodeLost"}),
    "terminating": (
        {"owner": True, "finalizers": [HOLD]},
        {"phase": "Running", "containerStatuses": [_container("tensorflow", state=RUNNING)]},
    ),
    "terminating-pending": ({"finalizers": [HOLD], "owner": "not controller"}, {}),
}


class Api:
    """Raw HTTPS requests to the control plane: bytes out, as the server wrote them."""

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane
        context = ssl.create_default_context(cafile=str(plane.ca_path))
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> bytes:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self._plane.server + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._plane.token}")
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", content_type)
        with self._opener.open(request, timeout=30) as response:
            return bytes(response.read())


def make_pods(api: Api, namespace: str) -> None:
    """The pods of `PODS` in `namespace`, their statuses written, the terminating ones
    deleted (a finalizer keeps them)."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    made = api.send(
        "POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "owner"}}
    )
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": json.loads(made)["metadata"]["uid"],
    }
    for index, (name, (extra, status)) in enumerate(PODS.items()):
        meta: dict[str, Any] = {"name": name, "labels": {"app": "fixture", "index": str(index)}}
        meta.update((k, v) for k, v in extra.items() if k != "owner")
        if meta["labels"] is None:
            del meta["labels"]
        if extra.get("owner") is True:
            meta["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
        elif "owner" in extra:
            meta["ownerReferences"] = [owner]
        spec = {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "tensorflow", "image": "tf", "env": [{"name": "A"}]}],
        }
        api.send("POST", pods, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        if status:
            merge = "application/merge-patch+json"
            api.send("PATCH", f"{pods}/{name}/status", {"status": status}, content_type=merge)
        if HOLD in extra.get("finalizers", ()):
            api.send("DELETE", f"{pods}/{name}")


def release(api: Api, namespace: str) -> None:
    """Let the terminating pods go (their finalizer removed)."""
    merge = "application/merge-patch+json"
    for name, (extra, _status) in PODS.items():
        if HOLD in extra.get("finalizers", ()):
            patch = {"metadata": {"finalizers": None}}
            path = f"/api/v1/namespaces/{namespace}/pods/{name}"
            api.send("PATCH", path, patch, content_type=merge)


def capture(api: Api, namespace: str, folder: Path) -> None:
    """The four pages, at one resourceVersion, into `folder`."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    version = json.loads(api.send("GET", path))["metadata"]["resourceVersion"]
    at = f"{path}?resourceVersion={version}&resourceVersionMatch=Exact"
    for name, query in (("pods", at), ("page", f"{at}&limit={PAGE}")):
        (folder / f"{name}.json").write_bytes(api.send("GET", query))
        (folder / f"{name}.pb").write_bytes(api.send("GET", query, accept=PROTOBUF))


def main() -> None:
    with ControlPlane() as plane:
        api = Api(plane)
        api.send("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        make_pods(api, NAMESPACE)
        capture(api, NAMESPACE, HERE)
    for name in ("pods.json", "pods.pb", "page.json", "page.pb"):
        print(f"{name}: {(HERE / name).stat().st_size} bytes")


if __name__ == "__main__":
    main()
