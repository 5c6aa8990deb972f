"""The in-memory API (testkit/fake_api.py) answers as the API server does where the
shell depends on it; tests/kubernetes/test_fake_api_parity.py runs the same requests
against a real one."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from testkit.fake_api import FakeApi, FakeClient
from testkit.helpers import tfjob
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.transport.client import METADATA_LIST, ApiError, TransportError
from tfjob.runtimes.kubernetes.transport.decode import POD_CODEC
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, LEASES, PODS, jobs_of

TFJOBS = jobs_of(TENSORFLOW)

NS = "default"


def _pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def _decode(raw: bytes) -> Any:
    return msgspec.json.decode(raw)


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def client(api: FakeApi) -> FakeClient:
    return api.client()


async def test_every_write_takes_the_next_resource_version_of_one_counter(
    client: FakeClient,
) -> None:
    a = _decode(await client.create(PODS, NS, _pod("a")))
    b = _decode(await client.create(TFJOBS, NS, tfjob("b", NS)))
    listed = _decode(await client.list(PODS, NS))
    versions = [int(a["metadata"]["resourceVersion"]), int(b["metadata"]["resourceVersion"])]
    assert versions[0] < versions[1] == int(listed["metadata"]["resourceVersion"])
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"]
    assert (listed["kind"], b["kind"], b["apiVersion"]) == ("PodList", "TFJob", "kubeflow.org/v1")


async def test_errors_carry_the_api_servers_codes_and_reasons(client: FakeClient) -> None:
    with pytest.raises(ApiError) as missing:
        await client.get(PODS, NS, "nope")
    assert missing.value.not_found and missing.value.message == 'pods "nope" not found'
    await client.create(PODS, NS, _pod("a"))
    with pytest.raises(ApiError) as twice:
        await client.create(PODS, NS, _pod("a"))
    assert twice.value.already_exists and not twice.value.conflict
    with pytest.raises(ApiError) as nameless:
        await client.create(PODS, NS, {"metadata": {}})
    assert (nameless.value.code, nameless.value.reason) == (422, "Invalid")
    with pytest.raises(ApiError) as elsewhere:
        await client.create(PODS, "no-such-namespace", _pod("a"))
    assert elsewhere.value.not_found and "namespaces" in elsewhere.value.message
    assert await client.delete(PODS, NS, "nope") is None


async def test_a_put_at_a_stale_resource_version_is_a_conflict(client: FakeClient) -> None:
    created = _decode(await client.create(LEASES, NS, {"metadata": {"name": "l"}, "spec": {}}))
    first = {**created, "spec": {"holderIdentity": "one"}}
    second = {**created, "spec": {"holderIdentity": "two"}}
    await client.replace(LEASES, NS, "l", first)
    with pytest.raises(ApiError) as lost:
        await client.replace(LEASES, NS, "l", second)  # read before the first write
    assert lost.value.conflict and lost.value.code == 409
    stored = _decode(await client.get(LEASES, NS, "l"))
    assert stored["spec"] == {"holderIdentity": "one"}
    del second["metadata"]["resourceVersion"]  # unconditional: goes through
    await client.replace(LEASES, NS, "l", second)
    assert _decode(await client.get(LEASES, NS, "l"))["spec"] == {"holderIdentity": "two"}


async def test_the_status_subresource_alone_writes_the_status(client: FakeClient) -> None:
    job = _decode(await client.create(TFJOBS, NS, {**tfjob("j", NS), "status": {"x": 1}}))
    assert "status" not in job  # a create drops it
    status = {"conditions": [{"type": "Created", "status": "True"}]}
    written = _decode(await client.replace_status(TFJOBS, NS, "j", {**job, "status": status}))
    assert written["status"] == status and written["metadata"]["generation"] == 1
    relabelled = {**written, "metadata": {**written["metadata"], "labels": {"a": "b"}}}
    relabelled["status"] = {"conditions": []}
    replaced = _decode(await client.replace(TFJOBS, NS, "j", relabelled))
    assert replaced["status"] == status and replaced["metadata"]["labels"] == {"a": "b"}
    patched = _decode(await client.merge_patch(TFJOBS, NS, "j", {"status": {"x": 2}}))
    assert patched["status"] == status  # the main resource does not change the status
    patched = _decode(await client.merge_patch(TFJOBS, NS, "j", {"status": {"x": 2}}, "status"))
    assert patched["status"] == {**status, "x": 2}


async def test_a_write_that_changes_nothing_keeps_the_resource_version(
    client: FakeClient, api: FakeApi
) -> None:
    job = _decode(await client.create(TFJOBS, NS, tfjob("j", NS)))
    again = _decode(await client.replace(TFJOBS, NS, "j", job))
    assert again["metadata"]["resourceVersion"] == job["metadata"]["resourceVersion"]
    assert api.resource_version == job["metadata"]["resourceVersion"]
    spec = {**job["spec"], "runPolicy": {"suspend": True}}
    changed = _decode(await client.replace(TFJOBS, NS, "j", {**job, "spec": spec}))
    assert int(changed["metadata"]["resourceVersion"]) > int(job["metadata"]["resourceVersion"])
    assert changed["metadata"]["generation"] == 2


async def test_generate_name_gives_a_fresh_name(client: FakeClient) -> None:
    body = {"metadata": {"generateName": "j."}, "reason": "R"}
    names = {_decode(await client.create(EVENTS, NS, body))["metadata"]["name"] for _ in range(5)}
    assert len(names) == 5 and all(n.startswith("j.") and len(n) == 7 for n in names)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=a", ["p1", "p2"]),
        ("app==a,tier!=db", ["p1"]),
        ("app in (a, b)", ["p1", "p2", "p3"]),
        ("app notin (a)", ["p3", "p4"]),
        ("tier", ["p2"]),
        ("!tier", ["p1", "p3", "p4"]),
        ("", ["p1", "p2", "p3", "p4"]),
    ],
)
async def test_label_selectors(client: FakeClient, selector: str, expected: list[str]) -> None:
    await client.create(PODS, NS, _pod("p1", app="a"))
    await client.create(PODS, NS, _pod("p2", app="a", tier="db"))
    await client.create(PODS, NS, _pod("p3", app="b"))
    await client.create(PODS, NS, _pod("p4"))
    items = _decode(await client.list(PODS, NS, label_selector=selector))["items"]
    assert [i["metadata"]["name"] for i in items] == expected


async def test_pages_are_one_snapshot_at_one_resource_version(client: FakeClient) -> None:
    for i in range(5):
        await client.create(PODS, NS, _pod(f"p{i}"))
    pages = client.list_pages(PODS, NS, limit=2)
    first = _decode(await anext(pages))
    await client.create(PODS, NS, _pod("p9"))  # after the first page: not in this list
    rest = [_decode(page) async for page in pages]
    names = [i["metadata"]["name"] for page in (first, *rest) for i in page["items"]]
    assert names == [f"p{i}" for i in range(5)]
    assert {p["metadata"]["resourceVersion"] for p in (first, *rest)} == {"5"}


async def test_a_metadata_list_holds_only_metadata(client: FakeClient) -> None:
    await client.create(PODS, NS, _pod("p"))
    listed = _decode(await client.list(PODS, NS, accept=METADATA_LIST))
    assert listed["kind"] == "PartialObjectMetadataList"
    assert set(listed["items"][0]) == {"kind", "apiVersion", "metadata"}


async def _events(client: FakeClient, since: str, count: int, **kw: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    async for line in client.watch(PODS, NS, resource_version=since, **kw):
        event = _decode(line)
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) == count:
            break
    return seen


async def test_a_watch_from_a_version_delivers_each_change_after_it(
    client: FakeClient, api: FakeApi
) -> None:
    await client.create(PODS, NS, _pod("before"))
    since = api.resource_version
    await client.create(PODS, NS, _pod("a"))
    await client.merge_patch(PODS, NS, "a", {"metadata": {"labels": {"x": "1"}}})
    await client.delete(PODS, NS, "a")  # a pod: marked for deletion, then deleted
    assert await _events(client, since, 4) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    live = asyncio.create_task(_events(client, api.resource_version, 1))
    await asyncio.sleep(0)
    await client.create(PODS, NS, _pod("later"))
    assert await asyncio.wait_for(live, 5) == [("ADDED", "later")]


async def test_an_object_leaving_a_watchs_selector_is_deleted_for_it(
    client: FakeClient, api: FakeApi
) -> None:
    await client.create(PODS, NS, _pod("other"))
    since = api.resource_version
    await client.create(PODS, NS, _pod("a", owned="yes"))
    await client.merge_patch(PODS, NS, "a", {"metadata": {"labels": {"owned": None}}})
    await client.merge_patch(PODS, NS, "a", {"metadata": {"labels": {"owned": "yes"}}})
    events = await _events(client, since, 3, label_selector="owned=yes")
    assert events == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]


async def test_a_watch_from_before_the_history_kept_is_told_410() -> None:
    api = FakeApi(history=3)
    client = api.client()
    for i in range(5):
        await client.create(PODS, NS, _pod(f"p{i}"))
    lines = [_decode(line) async for line in client.watch(PODS, NS, resource_version="1")]
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in lines] == [
        ("ERROR", 410, "Expired")
    ]


async def test_a_watch_ends_when_the_server_closes_it(client: FakeClient, api: FakeApi) -> None:
    watching = asyncio.create_task(_events(client, api.resource_version, 10))
    await asyncio.sleep(0.01)
    api.close_watches()
    assert await asyncio.wait_for(watching, 5) == []


async def test_delete_answers_the_object_at_the_deletions_version(
    client: FakeClient, api: FakeApi
) -> None:
    await client.create(PODS, NS, _pod("a"))
    assert await client.delete(PODS, NS, "a", propagation="Background")
    [delete] = api.of("delete")
    assert delete.answer is not None and delete.body == {"propagationPolicy": "Background"}
    assert delete.answer["metadata"]["resourceVersion"] == api.resource_version


async def test_finalizers_and_a_bound_pod_hold_the_object_until_they_are_done(
    client: FakeClient, api: FakeApi
) -> None:
    held = {**_pod("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}}
    await client.create(PODS, NS, held)
    bound = {**_pod("bound"), "spec": {"nodeName": "n1", "containers": []}}
    await client.create(PODS, NS, bound)
    for name in ("held", "bound"):
        assert await client.delete(PODS, NS, name)
        assert _decode(await client.get(PODS, NS, name))["metadata"]["deletionTimestamp"]
    await client.merge_patch(PODS, NS, "held", {"metadata": {"finalizers": None}})
    api.finish_deletion(PODS, NS, "bound")  # the kubelet's part
    assert api.objects(PODS) == []


async def test_faults_fail_the_next_matching_requests_before_or_after_they_happen(
    client: FakeClient, api: FakeApi
) -> None:
    api.fail(503, verb="create", resource=PODS, times=2)
    api.fail(TransportError("reset"), verb="delete", after=True)
    for _ in range(2):
        with pytest.raises(ApiError) as failed:
            await client.create(PODS, NS, _pod("a"))
        assert failed.value.code == 503
    await client.create(PODS, NS, _pod("a"))  # the third goes through
    with pytest.raises(TransportError):
        await client.delete(PODS, NS, "a")
    assert api.objects(PODS) == []  # carried out; only the answer was lost
    assert [(r.verb, r.name, r.error is not None) for r in api.requests] == [
        ("create", "a", True),
        ("create", "a", True),
        ("create", "a", False),
        ("delete", "a", True),
    ]


async def test_the_informer_lists_and_follows_the_fake(client: FakeClient) -> None:
    """The shell's own informer, unchanged, keeps its cache equal to the fake's pods."""
    await client.create(PODS, NS, _pod("a"))
    informer = Informer(client, PODS, POD_CODEC, namespace=NS, page_size=1)  # type: ignore[arg-type]
    running = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
        await client.create(PODS, NS, _pod("b"))
        await client.delete(PODS, NS, "a")
        for _ in range(100):
            if [p.metadata.name for p in informer.items()] == ["b"]:
                break
            await asyncio.sleep(0.01)
        assert [p.metadata.name for p in informer.items()] == ["b"]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_dry_run_stores_nothing_and_an_unserved_resource_is_not_found() -> None:
    api = FakeApi(served=[PODS])
    client = api.client()
    answer = _decode(await client.create(PODS, NS, _pod("dry"), dry_run=True))
    assert answer["metadata"]["name"] == "dry" and "resourceVersion" not in answer["metadata"]
    assert api.objects(PODS) == [] and api.resource_version == "0"
    with pytest.raises(ApiError) as unserved:
        await client.list(TFJOBS, NS)
    assert unserved.value.not_found


async def test_a_patch_naming_a_stale_version_is_a_conflict(client: FakeClient) -> None:
    created = _decode(await client.create(PODS, NS, _pod("a")))
    await client.merge_patch(PODS, NS, "a", {"metadata": {"labels": {"x": "1"}}})
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    with pytest.raises(ApiError) as lost:
        await client.merge_patch(PODS, NS, "a", {**stale, "spec": {}})
    assert lost.value.conflict
