"""Decoding the API server's JSON into what the caches keep (the hot path).

Pods and services go straight from bytes into the slim `tfjob.api.observed`
projections: msgspec skips every field the core does not read (managedFields, the pod
spec, ...), far faster and smaller than full models
(docs/decisions/0001-msgspec-projections.md). Jobs are decoded into their kind's full
typed model (`JobDecoder`) one by one, so one job the model cannot hold never hides
the others: it becomes an `UndecodableJob` that the reconciler marks Failed.

Every cached pod and service then has its repeated strings interned (`_sharer`): the
fields `api/observed.py` marks `shared` (the namespace, label keys and values, the
owner's kind, apiVersion, name and uid, the phase). msgspec makes a new str for each
of them per object; the ~40-80 characters label keys and the values shared by a job's
8 objects were about half of a cached pod. Pod pages read as protobuf (pod_proto.py)
have the same fields interned as they are read.
"""

from __future__ import annotations

import itertools
import linecache
import re
import sys
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from tfjob.api.errors import InvalidJob
from tfjob.api.observed import Meta, OwnedObject, Pod, Service, table
from tfjob.api.types import Job, JobStatus, ObjectMeta

SHARED_STRING = 64  # longer strings in a job's template are rarely repeated: not interned


class HasMeta(Protocol):
    """What the informer needs of every cached object."""

    @property
    def metadata(self) -> Any: ...


T = TypeVar("T", bound=HasMeta)
S = TypeVar("S", bound=msgspec.Struct)


class ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # wire name
    continue_: str = msgspec.field(name="continue", default="")


class RawList(msgspec.Struct):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] | None = None


class PodList(msgspec.Struct):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[Pod] | None = None


class ServiceList(msgspec.Struct):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[Service] | None = None


class RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class Status(msgspec.Struct):
    """A metav1.Status: the body of API errors and of watch ERROR events."""

    code: int = 0
    reason: str = ""
    message: str = ""


class UndecodableJob(msgspec.Struct, kw_only=True):
    """A job its kind's typed model cannot hold: kept so it can be marked Failed."""

    metadata: ObjectMeta
    status: JobStatus
    error: str


CachedJob = Job | UndecodableJob


class Codec(Generic[T]):
    """How one resource's lists and single objects are decoded."""

    def __init__(
        self,
        decode_list: Callable[[bytes], tuple[list[T], str, str]],
        decode_object: Callable[[bytes], T],
        *,
        list_accept: str = "",
    ) -> None:
        """`list_accept`: the Accept header for list pages that `decode_list` reads
        ("": JSON); watch events and single objects are always JSON."""
        self.decode_list = decode_list
        self.decode_object = decode_object
        self.list_accept = list_accept


_status = msgspec.json.Decoder(Status)
_event = msgspec.json.Decoder(RawEvent)
_pod = msgspec.json.Decoder(Pod)
_service = msgspec.json.Decoder(Service)
_pods = msgspec.json.Decoder(PodList)
_services = msgspec.json.Decoder(ServiceList)
_raw_list = msgspec.json.Decoder(RawList)


class _MetaOnly(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _StatusOnly(msgspec.Struct):
    status: JobStatus = msgspec.field(default_factory=JobStatus)


class _Head(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: JobStatus = msgspec.field(default_factory=JobStatus)


_meta_only = msgspec.json.Decoder(_MetaOnly)
_status_only = msgspec.json.Decoder(_StatusOnly)
_head = msgspec.json.Decoder(_Head)


def decode_job_head(raw: bytes) -> tuple[ObjectMeta, JobStatus]:
    """A job's metadata and status, whatever its kind and however odd its spec."""
    head = _head.decode(raw)
    return head.metadata, head.status


def decode_event(line: bytes) -> RawEvent:
    return _event.decode(line)


class _RvOnly(msgspec.Struct):
    class _Meta(msgspec.Struct):
        resourceVersion: str = ""  # wire name

    metadata: _Meta = msgspec.field(default_factory=_Meta)


_rv_only = msgspec.json.Decoder(_RvOnly)


def resource_version_of(raw: bytes) -> str:
    """The resourceVersion of an object as the API server sent it ("" if none, as in a
    metav1.Status)."""
    return _rv_only.decode(raw).metadata.resourceVersion


def decode_status(raw: bytes) -> Status:
    try:
        return _status.decode(raw)
    except msgspec.DecodeError:
        return Status(message=raw[:500].decode("utf-8", "replace"))


def _sharer_source(struct: type[msgspec.Struct]) -> str:
    """Python source of `_share(o)`: intern in place, and return, a `struct` whose
    strings the projection's table marks `shared` (observed.pb), in it and in the
    structs it holds. Generated, so it runs as a hand-written one would; pod_proto.py's
    converters intern the same fields as they read protobuf."""
    lines = ["def _share(o):"]
    names = itertools.count(1)

    def visit(struct: type[msgspec.Struct], o: str, indent: str) -> None:
        for c in table(struct):
            value = f"{o}.{c.name}"
            if c.shared and c.kind is dict:
                lines.append(f"{indent}if {value}:")
                lines.append(
                    f"{indent}    {value} = {{_intern(k): _intern(v) for k, v in {value}.items()}}"
                )
            elif c.shared and c.kind is str and not c.repeated:
                lines.append(f"{indent}{value} = _intern({value})")
            elif c.shared:
                raise TypeError(f"{c.name}: only a str or a dict of str is shared")
            elif issubclass(c.kind, msgspec.Struct) and _holds_shared(c.kind):
                inner = f"o{next(names)}"
                if c.repeated:
                    lines.append(f"{indent}for {inner} in {value}:")
                    visit(c.kind, inner, indent + "    ")
                elif c.optional:
                    lines.append(f"{indent}if ({inner} := {value}) is not None:")
                    visit(c.kind, inner, indent + "    ")
                else:
                    lines.append(f"{indent}{inner} = {value}")
                    visit(c.kind, inner, indent)

    visit(struct, "o", "    ")
    return "\n".join([*lines, "    return o", ""])


def _holds_shared(struct: type[msgspec.Struct]) -> bool:
    return any(
        c.shared or (issubclass(c.kind, msgspec.Struct) and _holds_shared(c.kind))
        for c in table(struct)
    )


def _sharer(struct: type[S]) -> Callable[[S], S]:
    source = _sharer_source(struct)
    filename = f"<decode sharer of {struct.__name__}>"  # for tracebacks
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope: dict[str, Any] = {"_intern": sys.intern}
    exec(compile(source, filename, "exec"), scope)  # the source made just above
    share: Callable[[S], S] = scope["_share"]
    return share


_shared_pod = _sharer(Pod)
#: Interns what a projected metadata repeats (its namespace, labels, owners), in place.
share_meta = _sharer(Meta)
_shared_service = _sharer(Service)


def _shared_job(job: Job) -> Job:
    """Intern what a job repeats of other jobs and of its own pods and services: its
    name and uid are their owner's, its namespace, kind and template keys are
    everyone's."""
    intern = sys.intern
    job.api_version = intern(job.api_version)
    job.kind = intern(job.kind)
    meta = job.metadata
    meta.name = intern(meta.name)
    meta.namespace = intern(meta.namespace)
    meta.uid = intern(meta.uid)
    specs = job.spec.replica_specs
    for spec in specs.values():
        spec.template = _shared_tree(spec.template)
        spec.restart_policy = intern(spec.restart_policy)
    setattr(job.spec, job.spec.REPLICA_SPECS, {intern(k): v for k, v in specs.items()})
    status = job.status
    for condition in status.conditions:
        condition.type = intern(condition.type)
        condition.status = intern(condition.status)
        condition.reason = intern(condition.reason)
    if status.replica_statuses:
        status.replica_statuses = {intern(k): v for k, v in status.replica_statuses.items()}
    return job


def _shared_tree(value: Any) -> Any:
    """A pod template with its keys and short strings interned (same data)."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= SHARED_STRING else value
    if isinstance(value, dict):
        return {sys.intern(k): _shared_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared_tree(v) for v in value]
    return value


def decode_pods(body: bytes) -> tuple[list[Pod], str, str]:
    page = _pods.decode(body)
    items = [_shared_pod(pod) for pod in page.items or ()]
    return items, page.metadata.resourceVersion, page.metadata.continue_


def decode_services(body: bytes) -> tuple[list[Service], str, str]:
    page = _services.decode(body)
    items = [_shared_service(service) for service in page.items or ()]
    return items, page.metadata.resourceVersion, page.metadata.continue_


def decode_pod(raw: bytes) -> Pod:
    return _shared_pod(_pod.decode(raw))


def decode_service(raw: bytes) -> Service:
    return _shared_service(_service.decode(raw))


class JobDecoder:
    """One kind's jobs: each into the kind's typed model (`job_type`), or an
    UndecodableJob naming the field the model could not read."""

    def __init__(self, job_type: type[Job]) -> None:
        self.job_type = job_type
        self._fast = msgspec.json.Decoder(job_type)
        self.codec: Codec[CachedJob] = Codec(self.page, self.one)

    def one(self, raw: bytes) -> CachedJob:
        try:
            return _shared_job(self._fast.decode(raw))
        except msgspec.ValidationError:
            pass
        # Only for a job the fast decoder refused; loading also reads YAML, which the
        # operator otherwise never imports (start-up time and memory).
        from tfjob.frameworks.load import decode_job

        document = msgspec.json.decode(raw)
        try:
            return decode_job(document if isinstance(document, dict) else {}, self.job_type)
        except InvalidJob as error:
            problems = "; ".join(str(e) for e in error.errors)
        meta, status = _lenient_meta(raw), _lenient_status(raw)
        return UndecodableJob(metadata=meta, status=status, error=problems)

    def page(self, body: bytes) -> tuple[list[CachedJob], str, str]:
        page = _raw_list.decode(body)
        jobs = [self.one(bytes(raw)) for raw in page.items or []]
        return jobs, page.metadata.resourceVersion, page.metadata.continue_


def _lenient_meta(raw: bytes) -> ObjectMeta:
    try:
        return _meta_only.decode(raw).metadata
    except msgspec.ValidationError:
        document = msgspec.json.decode(raw)
        meta = document.get("metadata", {}) if isinstance(document, dict) else {}
        return ObjectMeta(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
            resource_version=str(meta.get("resourceVersion", "")),
        )


def _lenient_status(raw: bytes) -> JobStatus:
    try:
        return _status_only.decode(raw).status
    except msgspec.ValidationError:
        return JobStatus()


#: What a protobuf pod page is asked as, and the bytes it starts with (runtime.Unknown);
#: pod_proto.py, which reads it, is imported only when one is read: an operator that
#: serves TrainJobs alone lists no pods, and protobuf's runtime is ~2.7 MB of memory.
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


def decode_pod_page(body: bytes) -> tuple[list[Pod], str, str]:
    """A pod list page asked for as protobuf; read as JSON if that is what came (a
    server or proxy that does not speak protobuf). A page neither can read raises
    msgspec.DecodeError, as a broken JSON page does: the informer retries the list."""
    if not body.startswith(MAGIC):
        return decode_pods(body)
    from tfjob.runtimes.kubernetes.transport import pod_proto

    try:
        return pod_proto.decode_pods(body)  # shared strings interned as they are read
    except pod_proto.DecodeError as error:
        raise msgspec.DecodeError(f"protobuf pod list: {error}") from error


class _ListHead(msgspec.Struct):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)


_list_head = msgspec.json.Decoder(_ListHead)
# A built-in resource's JSON list has its metadata before its items (kind, apiVersion,
# metadata, items); a custom resource's has its keys sorted, metadata last. The
# continue token is base64: no escapes to undo.
_CONTINUE = re.compile(rb'"continue":\s*"([^"\\]+)"')
_METADATA = b'"metadata":'
_ITEMS = b'"items":'


def continue_token(head: bytes, *, complete: bool = False) -> str | None:
    """A list page's continue token ("" on the last page) from its first bytes, JSON
    or protobuf, or None while they do not tell it; `complete`: `head` is the whole
    page, and the token is always known (a broken JSON page raises msgspec.DecodeError).

    So the client can ask for the next page while this one is still arriving."""
    if head.startswith(MAGIC):
        from tfjob.runtimes.kubernetes.transport import pod_proto

        token = pod_proto.continue_token(head)
        return "" if token is None and complete else token
    items = head.find(_ITEMS)
    if items >= 0 and head.find(_METADATA, 0, items) >= 0:
        found = _CONTINUE.search(head, 0, items)
        return found.group(1).decode() if found else ""
    if complete:
        return _list_head.decode(head).metadata.continue_
    return None


POD_CODEC: Codec[Pod] = Codec(decode_pods, decode_pod)
# What the operator lists pods with: pages as protobuf, half the API server's CPU of
# JSON (pod_proto.py says why); watch events JSON.
POD_PROTO_CODEC: Codec[Pod] = Codec(decode_pod_page, decode_pod, list_accept=PROTOBUF)
SERVICE_CODEC: Codec[Service] = Codec(decode_services, decode_service)


def owned_codec(api_version: str, kind: str, *, with_status: bool = False) -> Codec[OwnedObject]:
    """How the objects of one kind that jobs own (a ConfigMap, a Role, an HPA, a gang
    group...) are decoded: each kept whole (api.observed.OwnedObject), its status only
    `with_status`. A list's items carry no apiVersion and kind: they are set from the
    resource's."""

    def one(raw: bytes) -> OwnedObject:
        document = msgspec.json.decode(raw)
        document.setdefault("apiVersion", api_version)
        document.setdefault("kind", kind)
        return OwnedObject.of(document, with_status=with_status)

    def page(body: bytes) -> tuple[list[OwnedObject], str, str]:
        listed = _raw_list.decode(body)
        items = [one(bytes(raw)) for raw in listed.items or ()]
        return items, listed.metadata.resourceVersion, listed.metadata.continue_

    return Codec(page, one)
