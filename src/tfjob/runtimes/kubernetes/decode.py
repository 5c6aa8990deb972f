"""Decoding the API server's JSON into what the caches keep (the hot path).

Pods and services go straight from bytes into the slim `tfjob.api.observed`
projections: msgspec skips every field the core does not read (managedFields, the pod
spec, ...), which is ~10x faster and ~8x smaller than full models (see
docs/decisions/, record 0001). TFJobs are decoded into the full typed model one by one,
so one job the model cannot hold never hides the others: it becomes an
`UndecodableJob` that the reconciler marks Failed.

Every cached pod and service then has its repeated strings interned (`_share`): the
namespace, label keys and values, the owner's kind, apiVersion and name, the phase.
msgspec makes a new str for each of them per object; the ~40-80 characters label
keys and the values shared by a job's 8 objects were about half of a cached pod.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from tfjob.api.errors import InvalidJob
from tfjob.api.observed import Meta, Pod, Service
from tfjob.api.types import JobStatus, ObjectMeta, TFJob
from tfjob.runtimes.kubernetes import pod_proto

SHARED_STRING = 64  # longer strings in a job's template are rarely repeated: not interned


class HasMeta(Protocol):
    """What the informer needs of every cached object."""

    @property
    def metadata(self) -> Any: ...


T = TypeVar("T", bound=HasMeta)


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
    """A TFJob the typed model cannot hold: kept so it can be marked Failed."""

    metadata: ObjectMeta
    status: JobStatus
    error: str


CachedJob = TFJob | UndecodableJob


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
_job = msgspec.json.Decoder(TFJob)


class _MetaOnly(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _StatusOnly(msgspec.Struct):
    status: JobStatus = msgspec.field(default_factory=JobStatus)


_meta_only = msgspec.json.Decoder(_MetaOnly)
_status_only = msgspec.json.Decoder(_StatusOnly)


def decode_event(line: bytes) -> RawEvent:
    return _event.decode(line)


def decode_status(raw: bytes) -> Status:
    try:
        return _status.decode(raw)
    except msgspec.DecodeError:
        return Status(message=raw[:500].decode("utf-8", "replace"))


def _share(meta: Meta) -> None:
    """Intern the strings many cached objects repeat, so they are held once."""
    intern = sys.intern
    meta.namespace = intern(meta.namespace)
    if meta.labels:
        meta.labels = {intern(k): intern(v) for k, v in meta.labels.items()}
    for ref in meta.owner_references:
        ref.api_version = intern(ref.api_version)
        ref.kind = intern(ref.kind)
        ref.name = intern(ref.name)
        ref.uid = intern(ref.uid)


def _shared_pod(pod: Pod) -> Pod:
    _share(pod.metadata)
    pod.status.phase = sys.intern(pod.status.phase)
    return pod


def _shared_service(service: Service) -> Service:
    _share(service.metadata)
    return service


def _shared_job(job: TFJob) -> TFJob:
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
    specs = job.spec.tf_replica_specs
    for spec in specs.values():
        spec.template = _shared_tree(spec.template)
        spec.restart_policy = intern(spec.restart_policy)
    job.spec.tf_replica_specs = {intern(k): v for k, v in specs.items()}
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


def decode_jobs(body: bytes) -> tuple[list[CachedJob], str, str]:
    page = _raw_list.decode(body)
    jobs = [decode_tfjob(bytes(raw)) for raw in page.items or []]
    return jobs, page.metadata.resourceVersion, page.metadata.continue_


def decode_tfjob(raw: bytes) -> CachedJob:
    """A TFJob, or an UndecodableJob naming the field the model could not read."""
    try:
        return _shared_job(_job.decode(raw))
    except msgspec.ValidationError:
        pass
    # Only for a job the fast decoder refused; loading also reads YAML, which the
    # operator otherwise never imports (start-up time and memory).
    from tfjob.frameworks.load import decode_job

    document = msgspec.json.decode(raw)
    try:
        return decode_job(document if isinstance(document, dict) else {}, TFJob)
    except InvalidJob as error:
        problems = "; ".join(str(e) for e in error.errors)
    return UndecodableJob(metadata=_lenient_meta(raw), status=_lenient_status(raw), error=problems)


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


def decode_pod_page(body: bytes) -> tuple[list[Pod], str, str]:
    """A pod list page asked for as protobuf; read as JSON if that is what came (a
    server or proxy that does not speak protobuf). A page neither can read raises
    msgspec.DecodeError, as a broken JSON page does: the informer retries the list."""
    if not body.startswith(pod_proto.MAGIC):
        return decode_pods(body)
    try:
        return pod_proto.decode_pods(body)
    except pod_proto.DecodeError as error:
        raise msgspec.DecodeError(f"protobuf pod list: {error}") from error


POD_CODEC: Codec[Pod] = Codec(decode_pods, decode_pod)
# What the operator lists pods with: pages as protobuf, half the API server's CPU of
# JSON (pod_proto.py says why); watch events JSON.
POD_PROTO_CODEC: Codec[Pod] = Codec(decode_pod_page, decode_pod, list_accept=pod_proto.PROTOBUF)
SERVICE_CODEC: Codec[Service] = Codec(decode_services, decode_service)
JOB_CODEC: Codec[CachedJob] = Codec(decode_jobs, decode_tfjob)
