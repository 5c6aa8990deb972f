"""The in-memory API (testkit/fake_api.py) answers as the real API server does.

Each script sends the same requests through our client to the fake and to the real
kube-apiserver, and writes down what came back: status codes, reasons and messages of
errors, the fields a script looks at, the order of resourceVersions (each one is
replaced by its rank among those the script saw, as the real server's numbers skip
the revisions of other writers) and the events of watches. The two transcripts must
be equal: where they are, a test of the shell on the fake tests what the cluster
would do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import container, tfjob
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.transport.client import METADATA_LIST, ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import (
    EVENTS,
    LEASES,
    PODS,
    Resource,
    jobs_of,
)

TFJOBS = jobs_of(TENSORFLOW)
CONFIGMAPS = Resource("", "v1", "configmaps")


class Script:
    """What a script saw; `rv(...)` marks a resourceVersion to be compared by rank."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        self.lines: list[Any] = []

    def rv(self, version: str) -> Any:
        return ("rv", int(version))

    async def do(self, what: str, call: Awaitable[Any]) -> Any:
        """Send one request; note its error, or return its decoded answer."""
        try:
            answer = await call
        except ApiError as error:
            self.lines.append((what, error.code, error.reason, error.message))
            return None
        if isinstance(answer, bytes):
            answer = msgspec.json.decode(answer)
            # A list's version is the store's newest: on the shared API server other
            # tests' writes move it, so only an object's version is ranked.
            listed = isinstance(answer, dict) and "items" in answer
            if (
                isinstance(answer, dict)
                and not listed
                and answer.get("metadata", {}).get("resourceVersion")
            ):
                self.lines.append((what, "ok", self.rv(answer["metadata"]["resourceVersion"])))
            else:
                self.lines.append((what, "ok"))
        else:
            self.lines.append((what, answer))
        return answer

    def note(self, *what: Any) -> None:
        self.lines.append(what)

    def transcript(self) -> list[Any]:
        """The lines, each resourceVersion replaced by its rank."""
        seen: set[int] = set()

        def collect(value: Any) -> None:
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "rv":
                seen.add(value[1])
            elif isinstance(value, tuple | list):
                for item in value:
                    collect(item)

        collect(self.lines)
        rank = {version: index for index, version in enumerate(sorted(seen))}

        def replace(value: Any) -> Any:
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "rv":
                return ("rv", rank[value[1]])
            if isinstance(value, tuple | list):
                return type(value)(replace(item) for item in value)
            return value

        return [replace(line) for line in self.lines]


def _pod(name: str = "", generate: str = "", **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": labels}
    if name:
        metadata["name"] = name
    if generate:
        metadata["generateName"] = generate
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        # No scheduler of the session (another test may have started one) binds it:
        # the real server's pods must change only by the script's own requests.
        "spec": {"schedulerName": "parity-nobody", "containers": [container()]},
    }


async def _job_writes(s: Script) -> None:
    """Creates, conditional PUTs, the status subresource, no-op writes, deletes."""
    c, ns = s.client, s.ns
    job = await s.do("create", c.create(TFJOBS, ns, {**tfjob("j", ns), "status": {"x": "y"}}))
    s.note("status dropped on create", "status" not in job, job["metadata"]["generation"])
    await s.do("create again", c.create(TFJOBS, ns, tfjob("j", ns)))
    await s.do("get missing", c.get(TFJOBS, ns, "nope"))
    status = {"conditions": [{"type": "Created", "status": "True", "reason": "R"}]}
    written = await s.do("status", c.replace_status(TFJOBS, ns, "j", {**job, "status": status}))
    s.note("status written", written["status"] == status, written["metadata"]["generation"])
    await s.do("stale status", c.replace_status(TFJOBS, ns, "j", {**job, "status": {}}))
    same = await s.do("no-op put", c.replace(TFJOBS, ns, "j", written))
    s.note(
        "no-op keeps version",
        same["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"],
    )
    labelled = {**written, "metadata": {**written["metadata"], "labels": {"a": "b"}}, "status": {}}
    put = await s.do("put labels", c.replace(TFJOBS, ns, "j", labelled))
    s.note("put keeps status", put["status"] == status, put["metadata"]["generation"])
    spec = {**put["spec"], "runPolicy": {"suspend": True}}
    changed = await s.do("put spec", c.replace(TFJOBS, ns, "j", {**put, "spec": spec}))
    s.note("generation", changed["metadata"]["generation"])
    patched = await s.do(
        "patch status on main", c.merge_patch(TFJOBS, ns, "j", {"status": {"conditions": []}})
    )
    s.note("main patch keeps status", patched["status"] == status)
    subresource = {"status": {"conditions": None, "startTime": "2026-01-01T00:00:00Z"}}
    patched = await s.do("patch status", c.merge_patch(TFJOBS, ns, "j", subresource, "status"))
    s.note("status patched", patched["status"])
    await s.do("delete", c.delete(TFJOBS, ns, "j"))
    await s.do("delete again", c.delete(TFJOBS, ns, "j"))
    await s.do("get deleted", c.get(TFJOBS, ns, "j"))


async def _refusals(s: Script) -> None:
    """A missing namespace, a missing name; generateName; a lost Lease race."""
    c, ns = s.client, s.ns
    await s.do("no namespace", c.create(PODS, "no-such-namespace-here", _pod("p")))
    await s.do("no name", c.create(PODS, ns, _pod()))
    generated = await s.do("generated", c.create(PODS, ns, _pod(generate="w-")))
    name = generated["metadata"]["name"]
    s.note("generated name", name.startswith("w-"), len(name), generated["status"]["phase"])
    event = {
        "metadata": {"generateName": "j."},
        "involvedObject": {"kind": "TFJob", "name": "j", "namespace": ns},
        "reason": "Created",
        "message": "m",
        "type": "Normal",
    }
    await s.do("event", c.create(EVENTS, ns, event))
    await s.do("event count", c.merge_patch(EVENTS, ns, "nope", {"count": 2}))
    lease = await s.do("lease", c.create(LEASES, ns, {"metadata": {"name": "l"}, "spec": {}}))
    for holder in ("one", "two"):  # both read the same version
        body = {**lease, "spec": {"holderIdentity": holder}}
        await s.do(f"lease to {holder}", c.replace(LEASES, ns, "l", body))
    await s.do("dry run", c.create(PODS, ns, _pod("dry"), dry_run=True))
    await s.do("not stored", c.get(PODS, ns, "dry"))


async def _lists(s: Script) -> None:
    """Label selectors, and pages of one list at one resourceVersion."""
    c, ns = s.client, s.ns
    await s.do("p1", c.create(PODS, ns, _pod("p1", app="a")))
    await s.do("p2", c.create(PODS, ns, _pod("p2", app="a", tier="db")))
    await s.do("p3", c.create(PODS, ns, _pod("p3", app="b")))
    last = await s.do("p4", c.create(PODS, ns, _pod("p4")))
    for selector in ("app=a", "app==a,tier!=db", "app in (a, b)", "app notin (a)", "tier", "!tier"):
        listed = await s.do(selector, c.list(PODS, ns, label_selector=selector))
        s.note(selector, [i["metadata"]["name"] for i in listed["items"]])
    meta = await s.do("metadata only", c.list(PODS, ns, accept=METADATA_LIST, limit=1))
    s.note("metadata only", meta["kind"], sorted(meta["items"][0]), "continue" in meta["metadata"])
    pages = [msgspec.json.decode(p) async for p in c.list_pages(PODS, ns, limit=3)]
    # Every page is read at the first one's version, which other tests' writes to the
    # shared server may have moved past the script's last: so not ranked, compared.
    versions = {int(p["metadata"]["resourceVersion"]) for p in pages}
    s.note(
        "pages",
        [[i["metadata"]["name"] for i in p["items"]] for p in pages],
        len(versions) == 1,
        min(versions) >= int(last["metadata"]["resourceVersion"]),
    )


async def _watches(s: Script) -> None:
    """A watch from a version sees each later change, with its version; a selector's
    watch sees an object leave and enter it as DELETED and ADDED."""
    c, ns = s.client, s.ns
    first = await s.do("first", c.create(PODS, ns, _pod("first", owned="yes")))
    since = first["metadata"]["resourceVersion"]
    await s.do("a", c.create(PODS, ns, _pod("a", owned="yes")))
    await s.do("unlabel", c.merge_patch(PODS, ns, "a", {"metadata": {"labels": {"owned": None}}}))
    await s.do("relabel", c.merge_patch(PODS, ns, "a", {"metadata": {"labels": {"owned": "yes"}}}))
    await s.do("delete a", c.delete(PODS, ns, "a"))
    for selector, count in (("", 5), ("owned=yes", 5)):
        events = []
        watch = c.watch(
            PODS, ns, resource_version=since, label_selector=selector, timeout_seconds=10
        )
        async with contextlib.aclosing(watch):
            async for line in watch:
                event = msgspec.json.decode(line)
                if event["type"] == "BOOKMARK":
                    continue
                meta = event["object"]["metadata"]
                events.append((event["type"], meta["name"], s.rv(meta["resourceVersion"])))
                if len(events) == count:
                    break
        s.note(f"watch {selector!r}", events)


async def _paths(s: Script) -> None:
    """What the cluster commands read by path (jobs_api.py): discovery of the TFJob
    API, a job and its list by path, Events by a field selector."""
    c, ns = s.client, s.ns
    discovery = await s.do("discovery", c.get_path("/apis/kubeflow.org/v1"))
    s.note(
        "discovery",
        discovery["groupVersion"],
        "tfjobs" in {r["name"] for r in discovery["resources"]},
    )
    await s.do("missing group", c.get_path("/apis/no.such.group/v1"))
    await s.do("job", c.create(TFJOBS, ns, tfjob("j", ns)))
    got = await s.do("job by path", c.get_path(TFJOBS.path(ns, "j")))
    s.note("job by path", got["kind"], got["metadata"]["name"])
    # A list's resourceVersion is the store's newest: on the shared API server any
    # other writer (a lease renewal) may have moved it past the job's. Compared as
    # "not before the job's", not by rank.
    listed = msgspec.json.decode(await c.get_path(TFJOBS.path(ns), {"limit": "500"}))
    s.note("jobs by path", listed["kind"], [i["metadata"]["name"] for i in listed["items"]])
    version, made = (int(o["metadata"]["resourceVersion"]) for o in (listed, got))
    s.note("list version", version >= made)
    for name, kind in (("j", "TFJob"), ("j", "Pod"), ("k", "TFJob")):
        event = {
            "metadata": {"generateName": f"{name}."},
            "involvedObject": {"kind": kind, "name": name, "namespace": ns},
            "reason": f"{kind}-{name}",
            "message": "m",
            "type": "Normal",
        }
        await s.do("event", c.create(EVENTS, ns, event))
    selector = "involvedObject.kind=TFJob,involvedObject.name=j"
    events = await s.do("events of j", c.get_path(EVENTS.path(ns), {"fieldSelector": selector}))
    s.note("events of j", [e["reason"] for e in events["items"]])


async def _applies(s: Script) -> None:
    """Server-side applies by one field manager, forced, as a TrainJob's objects are
    written: a create, a no-op, a change (fields no longer applied are not scripted:
    the fake keeps them)."""
    c, ns = s.client, s.ns
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}

    async def apply(what: str, data: dict[str, str]) -> Any:
        body = {**configmap, "data": data}
        return await s.do(what, c.apply(CONFIGMAPS, ns, "cm", body, field_manager="m", force=True))

    made = await apply("apply creates", {"a": "1"})
    same = await apply("apply again", {"a": "1"})
    s.note(
        "no-op keeps version",
        same["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"],
    )
    changed = await apply("apply a change", {"a": "2", "b": "3"})
    s.note("applied data", changed["data"])
    managers = [
        (m["manager"], m["operation"]) for m in changed["metadata"].get("managedFields", [])
    ]
    s.note("managers", managers)


SCRIPTS: dict[str, Callable[[Script], Awaitable[None]]] = {
    "job writes": _job_writes,
    "applies": _applies,
    "refusals": _refusals,
    "lists": _lists,
    "watches": _watches,
    "paths": _paths,
}


@contextlib.asynccontextmanager
async def _real(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient.connect(str(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.mark.parametrize("script", list(SCRIPTS))
async def test_the_fake_answers_as_the_api_server(
    script: str, kubeconfig: Path, namespace: str, crd_installed: Any
) -> None:
    fake = Script(FakeApi(namespaces=[namespace]).client(), namespace)
    await asyncio.wait_for(SCRIPTS[script](fake), 30)
    async with _real(kubeconfig) as client:
        real = Script(client, namespace)
        await asyncio.wait_for(SCRIPTS[script](real), 30)
    assert fake.transcript() == real.transcript()
