"""Decoding Kubeflow Trainer's objects and the JobSets they become, for the caches.

What each cache keeps is what a TrainJob pass reads, no more (thousands of TrainJobs
and JobSets live in one process; bench/trainjob_memory.py counts the bytes):
- a TrainJob: the typed model (api/trainjob.py) without its managedFields, the
  strings other TrainJobs and its JobSet repeat interned (`_trainjob`);
- a runtime: the typed model with its managedFields (the runtime snapshot holds
  them, as Trainer's does: core/trainjob/snapshot.py); runtimes are few;
- a JobSet (`CachedJobSet`): its metadata typed as the cache indexes it (name, uid,
  owners...), and of the rest only what the core reads (core/trainjob/status.py,
  reconcile.py) as JSON: `metadata.creationTimestamp`, `spec.suspend`, the status'
  conditions and counts; the pod templates, most of a JobSet's bytes, are not kept
  (2,000 JobSets: 3.2 KB each kept as the whole metadata and status, 2.1 KB as the
  parts read, about 0.9 KB now).
A list's items may lack apiVersion and kind: they are set from the resource's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import structlog

from tfjob.api.observed import Meta
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.api.trainjob import API_VERSION, KIND, TrainJob
from tfjob.runtimes.kubernetes.transport.decode import Codec, HasMeta, RawList, share_meta

log = structlog.get_logger("tfjob.informer")

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
_list = msgspec.json.Decoder(RawList)
U = TypeVar("U", bound=HasMeta)


def _codec(one: Callable[[bytes], U]) -> Codec[U]:
    def page(body: bytes) -> tuple[list[U], str, str]:
        listed = _list.decode(body)
        items = []
        for raw in listed.items or ():
            try:
                items.append(one(bytes(raw)))
            except msgspec.ValidationError as error:  # one bad object must not stop a list
                log.error("cannot decode a listed object", error=str(error))
        return items, listed.metadata.resourceVersion, listed.metadata.continue_

    return Codec(page, one)


def _document(raw: bytes, api_version: str, kind: str) -> dict[str, Any]:
    document = msgspec.json.decode(raw)
    if not isinstance(document, dict):
        raise msgspec.ValidationError("not an object")
    document.setdefault("apiVersion", api_version)
    document.setdefault("kind", kind)
    return document


_trainjob_decoder = msgspec.json.Decoder(TrainJob, strict=False)


def _trainjob(raw: bytes) -> TrainJob:
    """A TrainJob decoded straight from its JSON, without its managedFields, its
    strings that other TrainJobs and its JobSet repeat interned (the namespace, the
    runtime's reference, the controller's name, the conditions' type, status, reason
    and message, the jobs' names; its name and uid, which its JobSet's owner
    reference repeats; the timestamps, to the second, shared by the TrainJobs made or
    ended in the same second): msgspec makes a new str of each per object."""
    trainjob = _trainjob_decoder.decode(raw)
    intern = sys.intern
    trainjob.api_version = _constant(trainjob.api_version, API_VERSION)
    trainjob.kind = _constant(trainjob.kind, KIND)
    meta = trainjob.metadata
    meta.managed_fields = _NO_LIST
    meta.labels = meta.labels or _NO_DICT
    meta.annotations = meta.annotations or _NO_DICT
    meta.finalizers = meta.finalizers or _NO_LIST
    meta.owner_references = meta.owner_references or _NO_LIST
    meta.name = intern(meta.name)
    meta.namespace = intern(meta.namespace)
    meta.uid = intern(meta.uid)
    if meta.creation_timestamp is not None:
        meta.creation_timestamp = intern(meta.creation_timestamp)
    spec = trainjob.spec
    spec.runtime_patches = spec.runtime_patches or _NO_LIST
    if spec.trainer is not None:
        spec.trainer.env = spec.trainer.env or _NO_LIST
    if spec.managed_by is not None:
        spec.managed_by = intern(spec.managed_by)
    ref = spec.runtime_ref
    ref.name = intern(ref.name)
    if ref.api_group is not None:
        ref.api_group = intern(ref.api_group)
    if ref.kind is not None:
        ref.kind = intern(ref.kind)
    status = trainjob.status
    status.conditions = status.conditions or _NO_LIST
    status.jobs_status = status.jobs_status or _NO_LIST
    for condition in status.conditions:
        condition.type = intern(condition.type)
        condition.status = intern(condition.status)
        condition.reason = intern(condition.reason)
        condition.message = intern(condition.message)
        condition.last_transition_time = intern(condition.last_transition_time)
    for job in status.jobs_status:
        job.name = intern(job.name)
    return trainjob


#: The one empty list and dict of every cached TrainJob's and JobSet's fields that
#: have none (msgspec makes a new one per object: 56 and 64 bytes, seven a TrainJob).
#: Never changed in place: nothing changes a cached object (decode.py shares the v1
#: jobs' templates the same way).
_NO_LIST: list[Any] = []
_NO_DICT: dict[str, Any] = {}


def _constant(value: str, constant: str) -> str:
    """`constant` for an absent (a list's items) or equal value: one str for all."""
    return constant if value in ("", constant) else value


def runtime_codec(kind: str) -> Codec[TrainingRuntime]:
    """A TrainingRuntime's or ClusterTrainingRuntime's cache (`kind` names which)."""
    return _codec(lambda raw: decode_runtime(_document(raw, API_VERSION, kind)))


class _JobSetMeta(Meta):
    """A JobSet's metadata as the cache indexes it, and while decoding its
    creationTimestamp (the core times the JobSet's first counts from it:
    core/trainjob/status.py), which moves into the kept document."""

    creation_timestamp: str = ""


class _JobSetSpec(msgspec.Struct):
    suspend: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _JobSetStatus(msgspec.Struct, rename="camel"):
    conditions: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    replicated_jobs_status: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _JobSet(msgspec.Struct, rename="camel"):
    """The parts of a JobSet the cache keeps; the rest (the pod templates, the
    managedFields: most of its bytes; labels, annotations, `restarts`,
    `terminalState`: nothing a pass reads) is skipped while decoding, never built.
    What the core reads of the spec and status is taken as the JSON it is (`Raw`)."""

    api_version: str = JOBSET_API_VERSION
    kind: str = "JobSet"
    metadata: _JobSetMeta | None = None
    spec: _JobSetSpec | None = None
    status: _JobSetStatus | None = None


class CachedJobSet(msgspec.Struct, gc=False):
    """A cached JobSet: its metadata typed (what the cache indexes: name, uid, owner),
    and what the core reads of the rest (`metadata.creationTimestamp`, `spec.suspend`,
    the status' conditions and replicated jobs' counts) as the JSON of the document
    `document` returns. Kept as JSON, it is one bytes object rather than a tree of
    dicts and strings (about 300 bytes against 1.3 KB); `document` decodes it at each
    read, a new dict each time (a few microseconds, once per pass or JobSet event)."""

    metadata: Meta
    api_version: str
    kept: bytes

    @property
    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = _kept.decode(self.kept)
        document["apiVersion"] = self.api_version
        document["kind"] = "JobSet"
        return document

    @property
    def kind(self) -> str:
        return "JobSet"


_jobset_decoder = msgspec.json.Decoder(_JobSet)
_kept = msgspec.json.Decoder(dict[str, Any])


def _jobset(raw: bytes) -> CachedJobSet:
    """The JobSet as the TrainJob controller reads it (`CachedJobSet`). Its strings
    that the TrainJob and other JobSets repeat (namespace, owner, its name: the
    TrainJob's) are interned, as the TrainJob's are (`_trainjob`)."""
    decoded = _jobset_decoder.decode(raw)
    meta = decoded.metadata or _JobSetMeta()
    kept: dict[str, Any] = {
        "metadata": {"creationTimestamp": meta.creation_timestamp}
        if meta.creation_timestamp
        else {}
    }
    meta.creation_timestamp = ""  # kept once, in `kept`
    meta.name = sys.intern(meta.name)
    share_meta(meta)
    meta.labels = meta.labels or _NO_DICT
    suspend = None if decoded.spec is None else decoded.spec.suspend
    kept["spec"] = {"suspend": suspend} if suspend else {}
    if decoded.status is not None:
        status = decoded.status
        kept["status"] = {
            name: value
            for name, value in (
                ("conditions", status.conditions),
                ("replicatedJobsStatus", status.replicated_jobs_status),
            )
            if value
        }
    return CachedJobSet(
        metadata=meta,
        api_version=JOBSET_API_VERSION
        if decoded.api_version == JOBSET_API_VERSION
        else decoded.api_version,  # the one string, not a copy per JobSet
        kept=msgspec.json.encode(kept),  # the Raw parts copied: none refers to `raw`
    )


TRAINJOB_CODEC: Codec[TrainJob] = _codec(_trainjob)
JOBSET_CODEC: Codec[CachedJobSet] = _codec(_jobset)
