"""Pod list pages as protobuf (what the operator lists pods with) make the same
projections as the JSON the watch sends, on the real API server."""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.observed import Pod
from tfjob.runtimes.kubernetes import pod_proto
from tfjob.runtimes.kubernetes.client import KubeClient
from tfjob.runtimes.kubernetes.decode import POD_CODEC, POD_PROTO_CODEC
from tfjob.runtimes.kubernetes.informer import Informer
from tfjob.runtimes.kubernetes.resources import PODS, Resource

NOW = "2026-12-01T10:00:00Z"
CONFIGMAPS = Resource("", "v1", "configmaps")


def _pod(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "proto", "index": name[-1]}, **meta},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {"name": "tensorflow", "image": "tf", "env": [{"name": "A", "value": "1"}]}
            ],
        },
    }


def _statuses(**states: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "image": "tf",
            "imageID": "",
            "ready": False,
            "restartCount": 3,
            "state": state,
        }
        for name, state in states.items()
    ]


STATUSES: list[dict[str, Any]] = [
    {"phase": "Pending"},
    {
        "phase": "Running",
        "containerStatuses": _statuses(tensorflow={"running": {"startedAt": NOW}}),
        "initContainerStatuses": _statuses(
            init={"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": NOW}}
        ),
    },
    {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on memory.",
        "containerStatuses": _statuses(
            tensorflow={
                "terminated": {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "message": "oom",
                    "startedAt": NOW,
                }
            }
        ),
    },
    {
        "phase": "Pending",
        "containerStatuses": _statuses(
            tensorflow={"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}
        ),
    },
]


async def _make_pods(client: KubeClient, namespace: str) -> None:
    # A controller reference, as the operator's pods carry; its owner must exist, or
    # the garbage collector (where kube-controller-manager runs) deletes the pods.
    made = await client.create(CONFIGMAPS, namespace, {"metadata": {"name": "owner"}})
    uid = msgspec.json.decode(made)["metadata"]["uid"]
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }
    for index, status in enumerate(STATUSES):
        name = f"p{index}"
        extra: dict[str, Any] = {"ownerReferences": [owner]} if index % 2 else {}
        if index == 3:
            extra["finalizers"] = ["tfjob.test/hold"]  # deleted below, kept by this
        await client.create(PODS, namespace, _pod(name, **extra))
        await client.merge_patch(PODS, namespace, name, {"status": status}, subresource="status")
    await client.delete(PODS, namespace, "p3")  # now it has a deletionTimestamp


async def _release(client: KubeClient, namespace: str) -> None:
    await client.merge_patch(PODS, namespace, "p3", {"metadata": {"finalizers": None}})


async def _as_json_at(client: KubeClient, namespace: str, version: str) -> dict[str, Pod]:
    """The pods as JSON at exactly that resourceVersion: the same moment as the pages
    compared with them (a controller may change a terminating pod in between)."""
    query = {"resourceVersion": version, "resourceVersionMatch": "Exact"}
    pods, _, _ = POD_CODEC.decode_list(await client.get_path(PODS.path(namespace), query))
    return {pod.metadata.name: pod for pod in pods}


async def test_protobuf_pages_make_the_same_pods_as_json(
    client: KubeClient, namespace: str
) -> None:
    await _make_pods(client, namespace)
    try:
        pages: list[bytes] = []
        listing = client.list_pages(PODS, namespace, limit=2, accept=pod_proto.PROTOBUF)
        async for page in listing:
            assert page.startswith(pod_proto.MAGIC)
            pages.append(page)
        assert len(pages) == 2  # 4 pods, 2 a page: the continue token was read
        # ...from the first page's first bytes, before its items (so the next page is
        # asked for while this one is still read), and "" on the last page.
        first = pages[0]
        token = pod_proto.decode_pods(first)[2]
        known = next(n for n in range(len(first) + 1) if pod_proto.continue_token(first[:n]))
        assert pod_proto.continue_token(first[:known]) == token
        assert all(pod_proto.continue_token(first[:n]) is None for n in range(known))
        assert known < len(first) // 4
        assert pod_proto.continue_token(pages[1]) == ""
        as_proto = [pod for page in pages for pod in pod_proto.decode_pods(page)[0]]
        by_name = await _as_json_at(client, namespace, pod_proto.decode_pods(first)[1])
        assert [p.metadata.name for p in as_proto] == sorted(by_name)
        for pod in as_proto:
            assert pod == by_name[pod.metadata.name]
        assert by_name["p3"].metadata.deletion_timestamp is not None
        assert by_name["p2"].status.container_statuses[0].state.terminated is not None
    finally:
        await _release(client, namespace)


async def test_the_operators_pod_informer_lists_protobuf(
    client: KubeClient, namespace: str
) -> None:
    await _make_pods(client, namespace)
    try:
        informer = Informer(client, PODS, POD_PROTO_CODEC, namespace=namespace, page_size=3)
        await informer._list()
        assert sorted(p.metadata.name for p in informer.items()) == ["p0", "p1", "p2", "p3"]
        as_json = await _as_json_at(client, namespace, informer.resource_version)
        assert {p.metadata.name: p for p in informer.items()} == as_json
    finally:
        await _release(client, namespace)
