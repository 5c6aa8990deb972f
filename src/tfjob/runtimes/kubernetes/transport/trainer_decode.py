"""Decoding Kubeflow Trainer's objects and the JobSets they become, for the caches.

What each cache keeps is what a TrainJob pass reads, no more (thousands of TrainJobs
and JobSets live in one process):
- a TrainJob: the typed model (api/trainjob.py) without its managedFields;
- a runtime: the typed model with its managedFields (the runtime snapshot holds
  them, as Trainer's does: core/trainjob/snapshot.py); runtimes are few;
- a JobSet: its metadata (without managedFields), `spec.suspend` and its status,
  the only parts the core reads (core/trainjob/status.py, reconcile.py); the pod
  templates, most of a JobSet's bytes, are not kept.
A list's items may lack apiVersion and kind: they are set from the resource's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import structlog

from tfjob.api.observed import OwnedObject
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


class _ObjectMeta(msgspec.Struct, rename="camel"):
    """A JobSet's ObjectMeta but managedFields: what the JSON holds, left out where
    it has none."""

    name: Any = msgspec.UNSET
    generate_name: Any = msgspec.UNSET
    namespace: Any = msgspec.UNSET
    self_link: Any = msgspec.UNSET
    uid: Any = msgspec.UNSET
    resource_version: Any = msgspec.UNSET
    generation: Any = msgspec.UNSET
    creation_timestamp: Any = msgspec.UNSET
    deletion_timestamp: Any = msgspec.UNSET
    deletion_grace_period_seconds: Any = msgspec.UNSET
    labels: Any = msgspec.UNSET
    annotations: Any = msgspec.UNSET
    owner_references: Any = msgspec.UNSET
    finalizers: Any = msgspec.UNSET


class _JobSetSpec(msgspec.Struct):
    suspend: Any = msgspec.UNSET


class _JobSet(msgspec.Struct, rename="camel"):
    """The parts of a JobSet the cache keeps; the rest (the pod templates, the
    managedFields: most of its bytes) is skipped while decoding, never built."""

    api_version: Any = msgspec.UNSET
    kind: Any = msgspec.UNSET
    metadata: _ObjectMeta | None = None
    spec: _JobSetSpec | None = None
    status: Any = msgspec.UNSET


_jobset_decoder = msgspec.json.Decoder(_JobSet)


def _jobset(raw: bytes) -> OwnedObject:
    decoded = _jobset_decoder.decode(raw)
    kept: dict[str, Any] = {
        "apiVersion": JOBSET_API_VERSION if decoded.api_version is msgspec.UNSET
        else decoded.api_version,
        "kind": "JobSet" if decoded.kind is msgspec.UNSET else decoded.kind,
    }  # fmt: skip
    if decoded.metadata is not None:
        kept["metadata"] = msgspec.to_builtins(decoded.metadata)
    if decoded.status is not msgspec.UNSET:
        kept["status"] = decoded.status
    suspend = msgspec.UNSET if decoded.spec is None else decoded.spec.suspend
    kept["spec"] = {} if suspend is msgspec.UNSET else {"suspend": suspend}
    return OwnedObject.of(kept, with_status=True)


TRAINJOB_CODEC: Codec[TrainJob] = _codec(_trainjob)
JOBSET_CODEC: Codec[OwnedObject] = _codec(_jobset)
