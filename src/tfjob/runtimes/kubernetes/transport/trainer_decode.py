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


def _jobset(raw: bytes) -> OwnedObject:
    document = _document(raw, JOBSET_API_VERSION, "JobSet")
    spec = document.get("spec") or {}
    kept: dict[str, Any] = {
        k: document[k] for k in ("apiVersion", "kind", "metadata", "status") if k in document
    }
    kept["spec"] = {"suspend": spec["suspend"]} if "suspend" in spec else {}
    return OwnedObject.of(kept, with_status=True)


TRAINJOB_CODEC: Codec[TrainJob] = _codec(_trainjob)
JOBSET_CODEC: Codec[OwnedObject] = _codec(_jobset)
