"""An in-memory Kubernetes API for the shell's unit tests, as controller-runtime ships
`pkg/client/fake` beside envtest: a test that only needs a client needs no etcd.

`FakeApi` holds the objects; `FakeApi.client()` hands out a `FakeClient`, which has
the methods of `tfjob.runtimes.kubernetes.transport.client.KubeClient` the shell calls, with
the same answers (JSON bytes) and the same errors (`ApiError` with the API server's
codes and reasons, `TransportError`). What it keeps of the API server:

- one resourceVersion counter for every object, as etcd's revision: each write
  takes the next number, a list carries the current one;
- optimistic concurrency: a PUT (or a merge patch) naming a stale
  `metadata.resourceVersion` gets 409 Conflict, a create of an existing name 409
  AlreadyExists, a write that changes nothing leaves the object (and its
  resourceVersion) as it was and sends no watch event;
- the status subresource of pods, services, jobs and Kueue Workloads (`with_status`):
  `replace_status` takes only `status`, `replace` everything but `status`; a create
  drops a TFJob's status;
- `generateName`, namespaces that must exist (404 otherwise), resources that are
  not served when `served` names the others (404, as a CRD not installed), label selectors
  (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`), paged lists; equality
  field selectors on a `get_path` list;
- watches from a resourceVersion: ADDED/MODIFIED/DELETED lines as the server sends
  them (an object leaving a watch's selector is DELETED for it), an ERROR line with
  410 Expired when the resourceVersion is older than the history kept;
- deletes: a pod is first marked with a deletionTimestamp (MODIFIED), then removed
  (DELETED) at once unless a node runs it; an object with finalizers stays marked
  until they are gone; the rest goes at once. A DELETED event, and the answer
  of a pod's or service's DELETE, carry the deletion's resourceVersion (a custom
  resource's DELETE answers a Status).

Not kept: admission, schema validation and defaulting (a dry run stores nothing and
answers the object), garbage collection of owned objects, bookmarks.

Tests steer it with `fail(...)` (the next N requests that match fail, before or
after they are carried out) and read `requests`, the log of every request.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import itertools
import random
import re
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.cache.kueue import (
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from tfjob.runtimes.kubernetes.transport.client import (
    METADATA,
    METADATA_LIST,
    ApiError,
    TransportError,
)
from tfjob.runtimes.kubernetes.transport.resources import (
    CLUSTER_TRAINING_RUNTIMES,
    EVENTS,
    JOBSETS,
    LEASES,
    PODS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Resource,
    jobs_of,
)

Object = dict[str, Any]

# Every kind of job tfjob knows, as its CRD serves it (with a status subresource).
JOBS = {jobs_of(fw): fw.kind for fw in FRAMEWORKS.values()}
# Kubeflow Trainer's kinds and the JobSets a TrainJob becomes (status subresources:
# TrainJobs' and JobSets').
TRAINER = {
    TRAINJOBS: "TrainJob",
    JOBSETS: "JobSet",
    TRAINING_RUNTIMES: "TrainingRuntime",
    CLUSTER_TRAINING_RUNTIMES: "ClusterTrainingRuntime",
}
# Kueue's, read and written with --kueue-integration=external (cluster-scoped ones are
# kept in the namespace "": `add_namespace("")` before creating one).
KUEUE = {
    WORKLOADS: "Workload",
    RESOURCE_FLAVORS: "ResourceFlavor",
    WORKLOAD_PRIORITY_CLASSES: "WorkloadPriorityClass",
    PRIORITY_CLASSES: "PriorityClass",
}
# The kinds of the resources the operator touches (others: from the first object).
KINDS = {
    PODS: "Pod",
    SERVICES: "Service",
    EVENTS: "Event",
    **JOBS,
    LEASES: "Lease",
    **KUEUE,
    **TRAINER,
}
# Resources with a status subresource: `status` is written only through it.
WITH_STATUS = {PODS, SERVICES, *JOBS, WORKLOADS, TRAINJOBS, JOBSETS}
HISTORY = 10_000  # watch events kept; a watch from before them gets 410 Expired
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet
_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def api_error(code: int, message: str = "", reason: str = "") -> ApiError:
    """The error the API server answers with `code` (its usual reason)."""
    return ApiError(code, reason or _REASONS.get(code, "Unknown"), message or f"fake {code}")


@dataclass
class Request:
    """One request as the fake saw it; `verb` as the API server's audit log names it
    (get, list, watch, create, update, patch, delete), `answer` the object answered
    (for a delete: the object as deleted, with the deletion's resourceVersion)."""

    verb: str
    resource: str  # "pods", "tfjobs.kubeflow.org"
    namespace: str | None
    name: str = ""
    subresource: str = ""
    body: Object | None = None
    dry_run: bool = False
    answer: Object | None = None
    error: Exception | None = None
    params: Object | None = None  # a server-side apply's fieldManager and force


@dataclass
class Fault:
    matches: Callable[[Request], bool]
    error: Exception
    times: int
    after: bool  # carried out first: the answer is lost, as on a connection reset


@dataclass
class _Change:
    version: int
    resource: Resource
    namespace: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Object
    old: Object | None  # the object before a MODIFIED


@dataclass
class _Watch:
    resource: Resource
    namespace: str | None
    selector: Callable[[dict[str, str]], bool]
    queue: asyncio.Queue[_Change | None] = field(default_factory=asyncio.Queue)


class FakeApi:
    """The objects, their history and the request log (see the module docstring)."""

    def __init__(
        self,
        namespaces: Iterable[str] = ("default",),
        history: int = HISTORY,
        served: Iterable[Resource] | None = None,
        with_status: Iterable[Resource] = WITH_STATUS,
    ) -> None:
        """`served`: the only resources the server knows (404 for others); None: all.
        `with_status`: the resources with a status subresource (a CRD's, if declared)."""
        self.namespaces = set(namespaces)
        self.with_status = set(with_status)
        self.served = set(served) if served is not None else None
        self.requests: list[Request] = []
        self._objects: dict[tuple[Resource, str, str], Object] = {}
        self._kinds = dict(KINDS)
        self._version = itertools.count(1)
        self._current = 0
        self._history: collections.deque[_Change] = collections.deque(maxlen=history)
        self._watches: list[_Watch] = []
        self._faults: list[Fault] = []
        self._snapshots: dict[str, tuple[str, list[Object]]] = {}  # paged lists
        self._logs: dict[tuple[str, str], list[str]] = {}
        # The last field manager that applied each object (server-side apply).
        self.managers: dict[tuple[Resource, str, str], str] = {}
        self.latency = 0.0  # seconds each request takes (0: just a turn of the loop)

    # -- for the tests ------------------------------------------------------------------

    def client(self) -> FakeClient:
        return FakeClient(self)

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion handed out."""
        return str(self._current)

    def add_namespace(self, name: str) -> None:
        self.namespaces.add(name)

    def fail(
        self,
        error: Exception | int,
        *,
        verb: str = "",
        resource: Resource | None = None,
        name: str = "",
        when: Callable[[Request], bool] | None = None,
        times: int = 1,
        after: bool = False,
    ) -> None:
        """The next `times` requests matching `verb`, `resource`, `name` and `when` fail
        with `error` (an HTTP code: the API server's error for it); `after`: once
        carried out, as when the connection breaks before the answer arrives."""
        failure = api_error(error) if isinstance(error, int) else error

        def matches(request: Request) -> bool:
            return (
                (not verb or request.verb == verb)
                and (resource is None or request.resource == str(resource))
                and (not name or request.name == name)
                and (when is None or when(request))
            )

        self._faults.append(Fault(matches, failure, times, after))

    def of(self, verb: str = "", resource: Resource | None = None) -> list[Request]:
        """The requests logged with this verb and/or resource."""
        return [
            r
            for r in self.requests
            if (not verb or r.verb == verb) and (resource is None or r.resource == str(resource))
        ]

    def objects(self, resource: Resource, namespace: str | None = None) -> list[Object]:
        """Copies of the stored objects of a resource, by namespace and name."""
        return [
            copy.deepcopy(obj)
            for (res, ns, _name), obj in sorted(self._objects.items(), key=lambda i: i[0][1:])
            if res == resource and namespace in (None, ns)
        ]

    def object(self, resource: Resource, namespace: str, name: str) -> Object | None:
        found = self._objects.get((resource, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def set_log(self, namespace: str, pod: str, lines: list[str]) -> None:
        """What `stream_lines` and `get_path` answer for this pod's log."""
        self._logs[(namespace, pod)] = list(lines)

    def close_watches(self) -> None:
        """End every open watch, as an API server does when it times them out."""
        for watch in self._watches:
            watch.queue.put_nowait(None)

    def finish_deletion(self, resource: Resource, namespace: str, name: str) -> None:
        """Remove an object waiting on its grace period or finalizers (the kubelet's or
        a controller's part), with its DELETED event."""
        key = (resource, namespace, name)
        if key in self._objects:
            self._remove(key)

    # -- the requests ---------------------------------------------------------------------

    def _log(self, request: Request) -> Fault | None:
        """Log `request`; the fault it meets, if any (raised here unless `after`)."""
        self.requests.append(request)
        for fault in self._faults:
            if fault.times > 0 and fault.matches(request):
                fault.times -= 1
                if not fault.after:
                    request.error = fault.error
                    raise fault.error
                return fault
        return None

    def _next_version(self) -> str:
        self._current = next(self._version)
        return str(self._current)

    def _kind(self, resource: Resource) -> str:
        return self._kinds.get(resource, resource.plural.capitalize().removesuffix("s"))

    def _api_version(self, resource: Resource) -> str:
        return f"{resource.group}/{resource.version}" if resource.group else resource.version

    def _not_found(self, resource: Resource, name: str) -> ApiError:
        return ApiError(404, "NotFound", f'{resource} "{name}" not found')

    def _serves(self, resource: Resource) -> None:
        if self.served is not None and resource not in self.served:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _namespace_exists(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')

    def _stored(self, resource: Resource, namespace: str, name: str) -> Object:
        self._serves(resource)
        found = self._objects.get((resource, namespace, name))
        if found is None:
            raise self._not_found(resource, name)
        return found

    def _check_version(self, resource: Resource, current: Object, body: Object) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )

    def create(self, resource: Resource, namespace: str, body: Object, dry_run: bool) -> Object:
        self._serves(resource)
        self._namespace_exists(namespace)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            while True:
                name = meta["generateName"] + "".join(random.choices(_SUFFIX, k=5))
                if (resource, namespace, name) not in self._objects:
                    break
        if not name:
            raise ApiError(
                422,
                "Invalid",
                f'{self._kind(resource)} "" is invalid: metadata.name: Required value: '
                "name or generateName is required",
            )
        if (resource, namespace, name) in self._objects:
            raise ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists')
        if "kind" in obj:
            self._kinds.setdefault(resource, obj["kind"])
        obj["kind"] = self._kind(resource)
        obj["apiVersion"] = self._api_version(resource)
        meta.update(
            name=name,
            namespace=namespace,
            uid=str(uuid.uuid4()),
            creationTimestamp=_now(),
            generation=1,
        )
        for gone in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(gone, None)
        if resource in JOBS:
            obj.pop("status", None)
        elif resource == PODS:
            obj["status"] = {"phase": "Pending"}
        elif resource == SERVICES:
            obj["status"] = {"loadBalancer": {}}
        if dry_run:
            meta.pop("resourceVersion", None)
            return obj
        meta["resourceVersion"] = self._next_version()
        self._objects[(resource, namespace, name)] = obj
        self._record(resource, namespace, "ADDED", obj, None)
        return copy.deepcopy(obj)

    def update(
        self, resource: Resource, namespace: str, name: str, body: Object, subresource: str
    ) -> Object:
        current = self._stored(resource, namespace, name)
        if (body.get("metadata") or {}).get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        self._check_version(resource, current, body)
        new = copy.deepcopy(current)
        if subresource == "status":
            new["status"] = copy.deepcopy(body.get("status"))
            if new["status"] is None:
                del new["status"]
        else:
            kept = {k: current["metadata"][k] for k in _SERVER_FIELDS if k in current["metadata"]}
            new = copy.deepcopy(body)
            new["metadata"] = {**new.get("metadata", {}), **kept}
            new["kind"], new["apiVersion"] = current["kind"], current["apiVersion"]
            if resource in self.with_status:
                new.pop("status", None)
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
        return self._write(resource, namespace, current, new)

    def patch(
        self, resource: Resource, namespace: str, name: str, patch: Object, subresource: str
    ) -> Object:
        current = self._stored(resource, namespace, name)
        self._check_version(resource, current, patch)
        merged = _merge(copy.deepcopy(current), copy.deepcopy(patch))
        if resource in self.with_status:
            # Through the main resource the status stays; through /status only it changes.
            new = copy.deepcopy(current)
            if subresource == "status":
                new["status"] = merged.get("status")
            else:
                new = {**merged, "status": copy.deepcopy(current.get("status"))}
            if new.get("status") is None:
                new.pop("status", None)
        else:
            new = merged
        for key in _SERVER_FIELDS:
            if key in current["metadata"]:
                new["metadata"][key] = current["metadata"][key]
        return self._write(resource, namespace, current, new)

    def _write(self, resource: Resource, namespace: str, current: Object, new: Object) -> Object:
        """Store `new` in place of `current`: a new resourceVersion if anything changed."""
        meta = new["metadata"]
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return copy.deepcopy(current)
        if {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }:
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        meta["resourceVersion"] = self._next_version()
        key = (resource, namespace, meta["name"])
        self._objects[key] = new
        self._record(resource, namespace, "MODIFIED", new, current)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(key)  # no finalizer left, and no grace period runs
        return copy.deepcopy(new)

    def apply(
        self, resource: Resource, namespace: str, name: str, body: Object, manager: str
    ) -> Object:
        """A server-side apply by one manager: a create when the object is missing, else
        the applied fields merged into it (a JSON merge patch of them: fields the
        manager stopped applying are not removed, and no conflict with another
        manager is found, as no test needs it), the manager's Apply entry in
        managedFields. The status of a resource with a status subresource is not
        applied."""
        self._serves(resource)
        applied = {k: v for k, v in copy.deepcopy(body).items() if k != "status"}
        meta = applied.setdefault("metadata", {})
        meta["name"] = name
        self.managers[(resource, namespace, name)] = manager
        if (resource, namespace, name) not in self._objects:
            meta["managedFields"] = [_applied_by(manager)]
            return self.create(resource, namespace, applied, dry_run=False)
        current = self._stored(resource, namespace, name)
        others = [
            m
            for m in current["metadata"].get("managedFields") or []
            if (m.get("manager"), m.get("operation")) != (manager, "Apply")
        ]
        meta["managedFields"] = [*others, _applied_by(manager)]
        new = _merge(copy.deepcopy(current), applied)
        for key in _SERVER_FIELDS:
            if key in current["metadata"]:
                new["metadata"][key] = current["metadata"][key]
        return self._write(resource, namespace, current, new)

    def delete(self, resource: Resource, namespace: str, name: str, uid: str = "") -> Object:
        """A pod is deleted gracefully: first marked (a MODIFIED event), then removed at
        once if no node runs it, else when `finish_deletion` plays the kubelet. Any
        object with finalizers is marked and removed once the last one goes. With
        `uid`, only the object of that uid (409 as the API server answers otherwise)."""
        current = self._stored(resource, namespace, name)
        meta = current["metadata"]
        if uid and meta.get("uid") != uid:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if resource != PODS and not meta.get("finalizers"):
            return self._remove((resource, namespace, name))
        if meta.get("deletionTimestamp"):
            return copy.deepcopy(current)
        bound = resource == PODS and (current.get("spec") or {}).get("nodeName")
        new = copy.deepcopy(current)
        new["metadata"]["deletionTimestamp"] = _now()
        new["metadata"]["deletionGracePeriodSeconds"] = 30 if bound else 0
        return self._write(resource, namespace, current, new)

    def _remove(self, key: tuple[Resource, str, str]) -> Object:
        obj = copy.deepcopy(self._objects.pop(key))  # the history holds the stored one
        obj["metadata"]["resourceVersion"] = self._next_version()
        self._record(key[0], key[1], "DELETED", obj, None)
        return copy.deepcopy(obj)

    def _record(
        self, resource: Resource, namespace: str, kind: str, obj: Object, old: Object | None
    ) -> None:
        change = _Change(self._current, resource, namespace, kind, obj, old)
        self._history.append(change)
        for watch in self._watches:
            watch.queue.put_nowait(change)

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        selector: str,
        limit: int,
        token: str,
        where: Callable[[Object], bool] = lambda _obj: True,
    ) -> Object:
        """One page of a list: by label `selector` and `where` (a field selector), from
        a snapshot taken by the first page that later pages (`token`) continue."""
        self._serves(resource)
        if token:
            snapshot_id, _, offset_text = base64.b64decode(token).decode().partition(":")
            if snapshot_id not in self._snapshots:
                raise ApiError(410, "Expired", "the provided continue parameter is too old")
            (version, items), offset = self._snapshots[snapshot_id], int(offset_text)
        else:
            matches = _selector(selector)
            items = [
                obj
                for (res, ns, _name), obj in sorted(self._objects.items(), key=lambda i: i[0][1:])
                if res == resource
                and namespace in (None, ns)
                and matches(obj["metadata"].get("labels") or {})
                and where(obj)
            ]
            version, offset, snapshot_id = self.resource_version, 0, uuid.uuid4().hex
        page = items[offset : offset + limit] if limit else items[offset:]
        metadata: Object = {"resourceVersion": version}
        if limit and offset + limit < len(items):
            self._snapshots[snapshot_id] = (version, items)
            metadata["continue"] = base64.b64encode(
                f"{snapshot_id}:{offset + limit}".encode()
            ).decode()
        else:
            self._snapshots.pop(snapshot_id, None)
        return {
            "kind": f"{self._kind(resource)}List",
            "apiVersion": self._api_version(resource),
            "metadata": metadata,
            "items": [copy.deepcopy(obj) for obj in page],
        }

    def watch(
        self, resource: Resource, namespace: str | None, selector: str, since: str
    ) -> tuple[list[_Change], _Watch] | ApiError:
        """The changes after `since` and a subscription to the next ones, taken in one
        step; or the 410 the server sends when `since` is older than its history."""
        self._serves(resource)
        matches = _selector(selector)
        if since in ("", "0"):  # from now, the objects there first (as ADDED)
            backlog = [
                _Change(self._current, resource, ns, "ADDED", obj, None)
                for (res, ns, _name), obj in sorted(self._objects.items(), key=lambda i: i[0][1:])
                if res == resource and namespace in (None, ns)
            ]
            watch = _Watch(resource, namespace, matches)
            self._watches.append(watch)
            return backlog, watch
        start = int(since) if since.isdigit() else self._current
        oldest = self._history[0].version if self._history else self._current + 1
        if start < oldest - 1 and self._history.maxlen == len(self._history):
            return ApiError(410, "Expired", f"too old resource version: {start} ({oldest - 1})")
        backlog = [c for c in self._history if c.version > start]
        watch = _Watch(resource, namespace, matches)
        self._watches.append(watch)
        return backlog, watch

    def stop_watch(self, watch: _Watch) -> None:
        self._watches.remove(watch)


# Fields of metadata only the API server sets: a PUT or a patch does not change them.
_SERVER_FIELDS = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
)


class FakeClient:
    """`KubeClient`'s methods, answered by a `FakeApi` (see the module docstring)."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.closed = False
        # Called with (HTTP method, status code) after every answer, as KubeClient does.
        self.on_response: Callable[[str, int], None] = lambda _method, _code: None

    @property
    def server(self) -> str:
        return "https://fake-api.invalid"

    def with_own_budget(self) -> FakeClient:
        twin = FakeClient(self.api)
        twin.on_response = self.on_response
        return twin

    async def close(self) -> None:
        self.closed = True

    async def _call(self, method: str, request: Request, do: Callable[[], Object]) -> bytes:
        """Carry out one request: a turn of the event loop (or the fake's latency), the
        fault it meets, the answer as JSON bytes."""
        await asyncio.sleep(self.api.latency)
        try:
            fault = self.api._log(request)
            answer = do()
        except (ApiError, TransportError) as error:
            request.error = error
            self.on_response(method, error.code if isinstance(error, ApiError) else 0)
            raise
        request.answer = answer
        if fault is not None:
            request.error = fault.error
            raise fault.error
        self.on_response(method, 201 if request.verb == "create" else 200)
        return msgspec.json.encode(answer)

    # -- reading ----------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str, name: str) -> bytes:
        request = Request("get", str(resource), namespace, name)
        return await self._call(
            "GET", request, lambda: copy.deepcopy(self.api._stored(resource, namespace, name))
        )

    async def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str = "",
        limit: int = 500,
        continue_: str = "",
        accept: str = "",
    ) -> bytes:
        """One page; a protobuf `accept` is answered with JSON (the client reads both)."""
        request = Request("list", str(resource), namespace, body=_query(label_selector, accept))

        def do() -> Object:
            page = self.api.list(resource, namespace, label_selector, limit, continue_)
            return _metadata_list(page) if accept == METADATA_LIST else page

        return await self._call("GET", request, do)

    async def list_pages(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str = "",
        limit: int = 500,
        accept: str = "",
        compressed: bool = True,
    ) -> AsyncGenerator[bytes, None]:
        token = ""
        while True:
            page = await self.list(
                resource,
                namespace,
                label_selector=label_selector,
                limit=limit,
                continue_=token,
                accept=accept,
            )
            yield page
            token = msgspec.json.decode(page)["metadata"].get("continue", "")
            if not token:
                return

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 300,
        accept: str = "",
    ) -> AsyncGenerator[bytes, None]:
        """The changes after `resource_version`, one JSON line each, until
        `timeout_seconds` pass or `FakeApi.close_watches()`."""
        request = Request(
            "watch", str(resource), namespace, body=_query(label_selector, accept, resource_version)
        )
        opened: list[tuple[list[_Change], _Watch] | ApiError] = []

        def do() -> Object:
            opened.append(self.api.watch(resource, namespace, label_selector, resource_version))
            return {}

        await self._call("GET", request, do)
        [started] = opened
        if isinstance(started, ApiError):
            yield _line("ERROR", _status(started))
            return
        backlog, watch = started
        metadata_only = accept == METADATA
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        try:
            for change in backlog:
                line = _event_for(watch, change, metadata_only)
                if line is not None:
                    yield line
            while True:
                try:  # not wait_for, which on 3.11 can swallow a cancellation
                    async with asyncio.timeout_at(deadline):
                        change = await watch.queue.get()
                except TimeoutError:
                    return
                if change is None:
                    return
                line = _event_for(watch, change, metadata_only)
                if line is not None:
                    yield line
        finally:
            self.api.stop_watch(watch)

    async def get_path(self, path: str, params: dict[str, str] | None = None) -> bytes:
        """A pod's log, discovery of a group, or a resource's object or list by path."""
        request = Request("get", path, None, body=dict(params or {}))
        return await self._call("GET", request, lambda: self._by_path(path, params or {}))

    async def stream_lines(
        self, path: str, params: dict[str, str] | None = None
    ) -> AsyncGenerator[bytes, None]:
        """A pod's log set with `FakeApi.set_log`, line by line."""
        request = Request("get", path, None, body=dict(params or {}))
        lines: list[str] = []

        def do() -> Object:
            lines.extend(self._log_of(path))
            return {}

        await self._call("GET", request, do)
        for line in lines:
            yield line.encode()

    def _log_of(self, path: str) -> list[str]:
        found = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/log", path)
        if found is None:
            raise ApiError(404, "", "404 page not found\n")
        self.api._stored(PODS, found[1], found[2])  # 404 for a pod that is not there
        return self.api._logs.get((found[1], found[2]), [])

    def _by_path(self, path: str, params: dict[str, str]) -> Object:
        if path.endswith("/log"):
            return {"log": "\n".join(self._log_of(path))}
        served = self.api.served
        for resource in [r for r in self.api._kinds if served is None or r in served]:
            root = resource.path(None)
            if path in (root.rsplit("/", 1)[0], f"/apis/{resource.group}/{resource.version}"):
                return _discovery(self.api, resource)
            found = re.fullmatch(
                re.escape(root.rsplit("/", 1)[0])
                + rf"(?:/namespaces/([^/]+))?/{resource.plural}(?:/([^/]+))?",
                path,
            )
            if found is not None:
                namespace, name = found[1], found[2]
                if name:
                    return copy.deepcopy(self.api._stored(resource, namespace or "", name))
                selector, limit = params.get("labelSelector", ""), int(params.get("limit", "0"))
                fields = _field_selector(params.get("fieldSelector", ""))
                token = params.get("continue", "")
                return self.api.list(resource, namespace, selector, limit, token, fields)
        raise ApiError(404, "", "404 page not found\n")  # plain text, as the server's mux

    # -- writing ----------------------------------------------------------------------

    async def create(
        self, resource: Resource, namespace: str, body: Object, *, dry_run: bool = False
    ) -> bytes:
        request = Request("create", str(resource), namespace, _name(body), "", body, dry_run)
        return await self._call(
            "POST", request, lambda: self.api.create(resource, namespace, body, dry_run)
        )

    async def replace(self, resource: Resource, namespace: str, name: str, body: Object) -> bytes:
        request = Request("update", str(resource), namespace, name, "", body)
        return await self._call(
            "PUT", request, lambda: self.api.update(resource, namespace, name, body, "")
        )

    async def replace_status(
        self, resource: Resource, namespace: str, name: str, body: Object
    ) -> bytes:
        request = Request("update", str(resource), namespace, name, "status", body)
        return await self._call(
            "PUT", request, lambda: self.api.update(resource, namespace, name, body, "status")
        )

    async def merge_patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Object,
        subresource: str = "",
    ) -> bytes:
        request = Request("patch", str(resource), namespace, name, subresource, patch)
        return await self._call(
            "PATCH", request, lambda: self.api.patch(resource, namespace, name, patch, subresource)
        )

    async def apply(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Object,
        *,
        field_manager: str,
        force: bool = False,
    ) -> bytes:
        """Server-side apply, as far as one manager's objects need: creates the object,
        or merges the applied fields into it (`FakeApi.apply`)."""
        params = {"fieldManager": field_manager, "force": force}
        request = Request("apply", str(resource), namespace, name, "", body, params=params)
        return await self._call(
            "PATCH", request, lambda: self.api.apply(resource, namespace, name, body, field_manager)
        )

    async def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        propagation: str = "",
        uid: str = "",
    ) -> bytes | None:
        """Delete; the object as deleted (or as marked for deletion), None if it was
        already gone (404 is not an error here), or is another than `uid`'s (409)."""
        body: dict[str, Any] = {}
        if propagation:
            body["propagationPolicy"] = propagation
        if uid:
            body["preconditions"] = {"uid": uid}
        request = Request("delete", str(resource), namespace, name, "", body or None)
        try:
            answer = await self._call(
                "DELETE", request, lambda: self.api.delete(resource, namespace, name, uid)
            )
        except ApiError as error:
            if error.not_found or (uid and error.code == 409):
                return None
            raise
        if resource.group:  # a custom resource's DELETE answers a Status, not the object
            details = {"name": name, "group": resource.group, "kind": resource.plural}
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
            return msgspec.json.encode({**status, "status": "Success", "details": details})
        return answer


def _applied_by(manager: str) -> Object:
    """A managedFields entry of a server-side apply (its fields are not tracked)."""
    return {"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _name(body: Object) -> str:
    meta = body.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")


def _query(selector: str, accept: str, version: str | None = None) -> Object:
    query = {"labelSelector": selector, "accept": accept}
    if version is not None:
        query["resourceVersion"] = version
    return {k: v for k, v in query.items() if v}


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


_REQUIREMENT = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w./-]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?)\s*(?:,|$)"
)


def _selector(text: str) -> Callable[[dict[str, str]], bool]:
    """A label selector as the API server reads it (the forms in the module docstring)."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        found = _REQUIREMENT.match(text, position)
        if found is None or found.end() == position:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {text!r}")
        position = found.end()
        if found["not"]:
            absent = found["absent"]
            tests.append(lambda labels, k=absent: k not in labels)
            continue
        key, op = found["key"], found["op"]
        if op in ("=", "=="):
            tests.append(lambda labels, k=key, v=found["value"]: labels.get(k) == v)
        elif op == "!=":
            tests.append(lambda labels, k=key, v=found["value"]: labels.get(k) != v)
        elif found["set"]:
            values = {v.strip() for v in found["values"].split(",") if v.strip()}
            if found["set"] == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        else:
            tests.append(lambda labels, k=key: k in labels)
    return lambda labels: all(test(labels) for test in tests)


def _field_selector(text: str) -> Callable[[Object], bool]:
    """`a.b=c,d!=e` over an object's fields (what a field selector on a GET path asks)."""
    tests: list[tuple[list[str], str, bool]] = []
    for requirement in filter(None, (r.strip() for r in text.split(","))):
        negated = "!=" in requirement
        path, _, value = requirement.replace("!=", "=").replace("==", "=").partition("=")
        tests.append((path.strip().split("."), value.strip(), negated))

    def field(obj: Any, path: list[str]) -> str:
        for key in path:
            obj = obj.get(key) if isinstance(obj, dict) else None
        return "" if obj is None else str(obj)

    return lambda obj: all((field(obj, p) == v) != negated for p, v, negated in tests)


def _event_for(watch: _Watch, change: _Change, metadata_only: bool) -> bytes | None:
    """The line `watch` gets for `change`, if any: an object that leaves the watch's
    selector is DELETED for it, one that enters it ADDED."""
    if change.resource != watch.resource or watch.namespace not in (None, change.namespace):
        return None
    now = watch.selector(change.obj["metadata"].get("labels") or {})
    kind = change.type
    if kind == "MODIFIED" and change.old is not None:
        before = watch.selector(change.old["metadata"].get("labels") or {})
        if before and not now:
            kind, now = "DELETED", True
        elif now and not before:
            kind = "ADDED"
    if not now:
        return None
    obj = change.obj
    if metadata_only:
        obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", **_meta(obj)}
    return _line(kind, obj)


def _meta(obj: Object) -> Object:
    return {"metadata": obj["metadata"]}


def _metadata_list(page: Object) -> Object:
    items = [
        {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", **_meta(obj)}
        for obj in page["items"]
    ]
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": page["metadata"],
        "items": items,
    }


def _line(kind: str, obj: Object) -> bytes:
    return msgspec.json.encode({"type": kind, "object": obj})


def _status(error: ApiError) -> Object:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason,
        "code": error.code,
    }


def _discovery(api: FakeApi, resource: Resource) -> Object:
    group = resource.path(None).rsplit("/", 1)[0]
    resources = [
        {"name": res.plural, "namespaced": True, "kind": kind}
        for res, kind in api._kinds.items()
        if res.path(None).rsplit("/", 1)[0] == group and (api.served is None or res in api.served)
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api._api_version(resource),
        "resources": resources,
    }
