"""Decoding Kubeflow Trainer's objects and the JobSets they become, for the caches.

What each cache keeps is what a TrainJob pass reads, no more (thousands of TrainJobs
and JobSets live in one process):
- a TrainJob: the typed model (api/trainjob.py) without its managedFields;
- a runtime: the typed model with its managedFields (the runtime snapshot holds
  them, as Trainer's does: core/trainjob/snapshot.py); runtimes are few;
- a JobSet: its metadata typed as the cache indexes it (name, uid, owners...), and
  of the rest only what the core reads (core/trainjob/status.py, reconcile.py):
  `metadata.creationTimestamp`, `spec.suspend`, the status' conditions and counts;
  the pod templates, most of a JobSet's bytes, are not kept (2,000 JobSets: 3.2 KB
  each kept as the whole metadata and status, now less).
A list's items may lack apiVersion and kind: they are set from the resource's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import structlog

from tfjob.api.observed import Meta, OwnedObject
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.api.trainjob import API_VERSION, KIND, TrainJob, decode_trainjob
from tfjob.runtimes.kubernetes.transport.decode import Codec, HasMeta, RawList

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


def _trainjob(raw: bytes) -> TrainJob:
    document = _document(raw, API_VERSION, KIND)
    (document.get("metadata") or {}).pop("managedFields", None)
    return decode_trainjob(document)


def runtime_codec(kind: str) -> Codec[TrainingRuntime]:
    """A TrainingRuntime's or ClusterTrainingRuntime's cache (`kind` names which)."""
    return _codec(lambda raw: decode_runtime(_document(raw, API_VERSION, kind)))


class _JobSetMeta(Meta):
    """A JobSet's metadata as the cache indexes it, and its creationTimestamp (the
    core times the JobSet's first counts from it: core/trainjob/status.py)."""

    creation_timestamp: str = ""


class _JobSetSpec(msgspec.Struct):
    suspend: Any = msgspec.UNSET


class _JobSetStatus(msgspec.Struct, rename="camel"):
    conditions: Any = msgspec.UNSET
    replicated_jobs_status: Any = msgspec.UNSET


class _JobSet(msgspec.Struct, rename="camel"):
    """The parts of a JobSet the cache keeps; the rest (the pod templates, the
    managedFields: most of its bytes; labels, annotations, `restarts`,
    `terminalState`: nothing a pass reads) is skipped while decoding, never built."""

    api_version: str = JOBSET_API_VERSION
    kind: str = "JobSet"
    metadata: _JobSetMeta | None = None
    spec: _JobSetSpec | None = None
    status: _JobSetStatus | None = None


_jobset_decoder = msgspec.json.Decoder(_JobSet)


def _jobset(raw: bytes) -> OwnedObject:
    """The JobSet as the TrainJob controller reads it: its metadata typed (what the
    cache indexes), and a document of what the core reads (`metadata.creationTimestamp`,
    `spec.suspend`, the status' conditions and replicated jobs' counts)."""
    decoded = _jobset_decoder.decode(raw)
    meta = decoded.metadata or _JobSetMeta()
    kept: dict[str, Any] = {
        "apiVersion": JOBSET_API_VERSION
        if decoded.api_version == JOBSET_API_VERSION
        else decoded.api_version,  # the one string, not a copy per JobSet
        "kind": "JobSet" if decoded.kind == "JobSet" else decoded.kind,
    }
    kept["metadata"] = (
        {"creationTimestamp": meta.creation_timestamp} if meta.creation_timestamp else {}
    )
    suspend = msgspec.UNSET if decoded.spec is None else decoded.spec.suspend
    kept["spec"] = {} if suspend is msgspec.UNSET else {"suspend": suspend}
    if decoded.status is not None:
        status = decoded.status
        kept["status"] = {
            name: value
            for name, value in (
                ("conditions", status.conditions),
                ("replicatedJobsStatus", status.replicated_jobs_status),
            )
            if value is not msgspec.UNSET
        }
    return OwnedObject(metadata=meta, document=kept)


TRAINJOB_CODEC: Codec[TrainJob] = _codec(_trainjob)
JOBSET_CODEC: Codec[OwnedObject] = _codec(_jobset)
