"""The informer: what it reports after being away, and how it reads real lists.

In-process (no operator subprocess): the informer is stopped, the cluster changes,
and the informer is started again - the way a dropped watch connection looks to it.
Its own logic (resuming a watch, relisting on 410) runs on the in-memory API
(testkit/fake_api.py), which can also expire a watch's resourceVersion; how it reads
the real server's pages and metadata-only answers runs on the real API server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from testkit.fake_api import FakeApi
from testkit.helpers import IMAGE, tfjob, until
from testkit.operators import replica
from tfjob.api.observed import Pod
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.cache.informer import Handlers, Informer
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import POD_CODEC, SERVICE_CODEC, Codec, JobDecoder
from tfjob.runtimes.kubernetes.transport.resources import PODS, SERVICES, Resource, jobs_of

TFJOBS = jobs_of(TENSORFLOW)
TFJOB_DECODER = JobDecoder(TFJob)

CONFIGMAPS = Resource("", "v1", "configmaps")


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "informer-test"}},
        "spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]},
    }


def _service(name: str, owner_uid: str = "") -> dict[str, Any]:
    # The owner must exist: where kube-controller-manager runs, its garbage collector
    # deletes an object whose owner does not.
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "labels": {"app": "informer-test"},
            **({"ownerReferences": [owner]} if owner_uid else {}),
        },
        "spec": {"clusterIP": "None", "ports": [{"name": "tfjob-port", "port": 2222}]},
    }


class Seen:
    def __init__(self) -> None:
        self.added: list[str] = []
        self.updated: list[str] = []
        self.deleted: list[str] = []

    def handlers(self) -> Handlers[Pod]:
        return Handlers(
            on_add=lambda p: self.added.append(p.metadata.name),
            on_update=lambda _old, new: self.updated.append(new.metadata.name),
            on_delete=lambda p: self.deleted.append(p.metadata.name),
        )


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_restarted_informer_resumes_its_watch_without_relisting(api: FakeApi) -> None:
    client, namespace = api.client(), "default"
    informer = Informer(client, PODS, POD_CODEC, namespace=namespace)  # type: ignore[arg-type]
    seen = Seen()
    informer.add_handlers(seen.handlers())
    await client.create(PODS, namespace, _pod("a"))
    task = asyncio.create_task(informer.run())
    await until(lambda: informer.synced.is_set() and len(informer) == 1)
    await _stop(task)

    await client.create(PODS, namespace, _pod("b"))  # while it is away
    await client.delete(PODS, namespace, "a")
    task = asyncio.create_task(informer.run())
    await until(lambda: "a" in seen.deleted and len(informer) == 1)
    await _stop(task)
    assert seen.added == ["a", "b"]
    assert informer.get(f"{namespace}/b") is not None
    assert informer.relists == 0  # the watch picked up where it left off


async def test_a_relist_reports_what_changed_while_away() -> None:
    """A watch from a resourceVersion the API server no longer keeps gets 410 Expired:
    the informer lists afresh and delivers the difference between its cache and the
    list as adds and deletes (so a deletion it never saw as an event still reaches
    the handlers), then watches again. An object the relist finds unchanged (its
    resourceVersion the same) is no change: no handler hears of it."""
    api = FakeApi(namespaces=["default"], history=2)  # keeps only the last 2 changes
    client, namespace = api.client(), "default"
    informer = Informer(client, PODS, POD_CODEC, namespace=namespace)  # type: ignore[arg-type]
    seen = Seen()
    informer.add_handlers(seen.handlers())
    for name in ("a", "b"):
        await client.create(PODS, namespace, _pod(name))
    task = asyncio.create_task(informer.run())
    await until(lambda: len(informer) == 2)
    await _stop(task)

    await client.delete(PODS, namespace, "a")
    await client.create(PODS, namespace, _pod("c"))
    await client.create(PODS, namespace, _pod("x"))
    await client.delete(PODS, namespace, "x")  # its version is older than the history now
    task = asyncio.create_task(informer.run())
    await until(lambda: "a" in seen.deleted and len(informer) == 2)
    await client.create(PODS, namespace, _pod("d"))  # and it watches again afterwards
    await until(lambda: len(informer) == 3)
    await _stop(task)
    assert sorted(seen.added) == ["a", "b", "c", "d"]
    assert seen.deleted == ["a"]
    assert seen.updated == []  # "b" was listed again, unchanged
    assert {p.metadata.name for p in informer.items()} == {"b", "c", "d"}
    assert informer.relists == 1
    assert [
        r.verb for r in api.requests if r.resource == "pods" and r.verb in ("list", "watch")
    ] == [
        "list",  # the first start
        "watch",
        "watch",  # the restart: 410
        "list",
        "watch",
    ]


async def test_a_metadata_only_informer_caches_services_and_follows_them(
    client: KubeClient, namespace: str
) -> None:
    """The operator lists and watches its services as metadata only (the API server
    sends PartialObjectMetadata): the cache still holds each service's name, labels
    and owner, a later create arrives as an add and a delete as a delete."""
    informer = Informer(client, SERVICES, SERVICE_CODEC, namespace=namespace, metadata_only=True)
    seen: list[tuple[str, str]] = []
    informer.add_handlers(
        Handlers(
            on_add=lambda s: seen.append(("add", s.metadata.name)),
            on_delete=lambda s: seen.append(("delete", s.metadata.name)),
        )
    )
    owner = msgspec.json.decode(
        await client.create(CONFIGMAPS, namespace, {"metadata": {"name": "owner"}})
    )
    uid = owner["metadata"]["uid"]
    await client.create(SERVICES, namespace, _service("a", uid))
    task = asyncio.create_task(informer.run())
    await until(lambda: informer.synced.is_set() and len(informer) == 1)
    await client.create(SERVICES, namespace, _service("b", uid))
    await client.delete(SERVICES, namespace, "a")
    await until(lambda: ("delete", "a") in seen and len(informer) == 1)
    await _stop(task)
    assert seen == [("add", "a"), ("add", "b"), ("delete", "a")]
    cached = informer.get(f"{namespace}/b")
    assert cached is not None
    assert cached.metadata.labels == {"app": "informer-test"}
    assert [ref.name for ref in cached.metadata.owner_references] == ["owner"]
    assert cached.metadata.resource_version


async def test_pages_are_followed_to_the_end(client: KubeClient, namespace: str) -> None:
    """A list longer than a page is read page after page: nothing is left out."""
    informer = Informer(client, SERVICES, SERVICE_CODEC, namespace=namespace, page_size=2)
    for name in ("a", "b", "c", "d", "e"):
        await client.create(SERVICES, namespace, _service(name))
    task = asyncio.create_task(informer.run())
    await until(informer.synced.is_set)
    await _stop(task)
    assert sorted(s.metadata.name for s in informer.items()) == ["a", "b", "c", "d", "e"]


async def _added_once(informer: Informer[Any]) -> list[str]:
    """Run `informer` until synced; the names its handler was given, in order."""
    added: list[str] = []
    informer.add_handlers(Handlers(on_add=lambda obj: added.append(obj.metadata.name)))
    task = asyncio.create_task(informer.run())
    await until(informer.synced.is_set)
    await _stop(task)
    return added


async def test_the_first_list_delivers_every_object_once_by_the_time_it_is_synced(
    client: KubeClient, namespace: str, crd_installed: Any
) -> None:
    """Pages are asked for ahead and put in the cache as they come: at synced, the
    cache holds every object and each was handed to the handlers exactly once, for a
    built-in resource (its list's metadata before the items, read from the first
    bytes), as metadata only, and for TFJobs (a custom resource: the metadata after
    the items)."""
    names = [f"o{i}" for i in range(7)]
    for name in names:
        await client.create(SERVICES, namespace, _service(name))
        await client.create(TFJOBS, namespace, tfjob(name, namespace, {"Worker": replica(1)}))
    cases: list[tuple[Resource, Codec[Any], bool]] = [
        (SERVICES, SERVICE_CODEC, False),
        (SERVICES, SERVICE_CODEC, True),
        (TFJOBS, TFJOB_DECODER.codec, False),
    ]
    for resource, codec, metadata_only in cases:
        informer: Informer[Any] = Informer(
            client, resource, codec, namespace=namespace, page_size=2, metadata_only=metadata_only
        )
        added = await _added_once(informer)
        assert sorted(added) == names, (resource, metadata_only)
        assert sorted(o.metadata.name for o in informer.items()) == names
        assert informer.resource_version
