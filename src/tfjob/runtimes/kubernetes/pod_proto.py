"""Pod list pages as protobuf: what a restart costs the API server, halved.

Why: listing 40,000 pods as JSON cost the API server 1.3-1.8 s of CPU (2.8-3.5 s when
its garbage collector ran meanwhile), as protobuf 0.7-0.9 s, on the two cores it
shares with the operator (docs/decisions/, record 0010). Decoding protobuf in Python is
slower than msgspec's JSON, unless it is done in C: so the `protobuf` package's upb
core decodes each page into messages that declare only the fields the pod projection
reads, under the Kubernetes API's field numbers (every other field is skipped in C).
The descriptor is built here, in code: no `.proto` file, no generated module.

Only lists come as protobuf; watch events stay JSON (one pod at a time, cheap).
The projection made here equals the one `decode.py` makes from the same pod's JSON
(tests/kubernetes/operator/test_decode.py compares them on the real API server).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from tfjob.api.observed import (
    ContainerState,
    ContainerStatus,
    Meta,
    OwnerReference,
    Pod,
    PodStatus,
    Terminated,
    Waiting,
)

__all__ = ["MAGIC", "PROTOBUF", "DecodeError", "continue_token", "decode_pods"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"  # before every protobuf body the API server sends (runtime.Unknown)

_F = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_STR, _I32, _I64, _BOOL, _MSG, _BYTES = (
    _F.TYPE_STRING,
    _F.TYPE_INT32,
    _F.TYPE_INT64,
    _F.TYPE_BOOL,
    _F.TYPE_MESSAGE,
    _F.TYPE_BYTES,
)
_PACKAGE = "tfjob.podlist"

# (message, [(field, number in the Kubernetes API, type, label, message type)]):
# only what the projection reads.
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    ("Time", [("seconds", 1, _I64, _ONE, ""), ("nanos", 2, _I32, _ONE, "")]),
    (
        "OwnerReference",
        [
            ("kind", 1, _STR, _ONE, ""),
            ("name", 3, _STR, _ONE, ""),
            ("uid", 4, _STR, _ONE, ""),
            ("apiVersion", 5, _STR, _ONE, ""),
            ("controller", 6, _BOOL, _ONE, ""),
            ("blockOwnerDeletion", 7, _BOOL, _ONE, ""),
        ],
    ),
    (
        "ObjectMeta",
        [
            ("name", 1, _STR, _ONE, ""),
            ("namespace", 3, _STR, _ONE, ""),
            ("uid", 5, _STR, _ONE, ""),
            ("resourceVersion", 6, _STR, _ONE, ""),
            ("deletionTimestamp", 9, _MSG, _ONE, "Time"),
            ("labels", 11, _MSG, _MANY, "ObjectMeta.LabelsEntry"),
            ("ownerReferences", 13, _MSG, _MANY, "OwnerReference"),
        ],
    ),
    ("ContainerStateWaiting", [("reason", 1, _STR, _ONE, ""), ("message", 2, _STR, _ONE, "")]),
    (
        "ContainerStateTerminated",
        [
            ("exitCode", 1, _I32, _ONE, ""),
            ("reason", 3, _STR, _ONE, ""),
            ("message", 4, _STR, _ONE, ""),
        ],
    ),
    (
        "ContainerState",
        [
            ("waiting", 1, _MSG, _ONE, "ContainerStateWaiting"),
            ("terminated", 3, _MSG, _ONE, "ContainerStateTerminated"),
        ],
    ),
    (
        "ContainerStatus",
        [
            ("name", 1, _STR, _ONE, ""),
            ("state", 2, _MSG, _ONE, "ContainerState"),
            ("restartCount", 5, _I32, _ONE, ""),
        ],
    ),
    (
        "PodStatus",
        [
            ("phase", 1, _STR, _ONE, ""),
            ("message", 3, _STR, _ONE, ""),
            ("reason", 4, _STR, _ONE, ""),
            ("containerStatuses", 8, _MSG, _MANY, "ContainerStatus"),
            ("initContainerStatuses", 10, _MSG, _MANY, "ContainerStatus"),
        ],
    ),
    ("Pod", [("metadata", 1, _MSG, _ONE, "ObjectMeta"), ("status", 3, _MSG, _ONE, "PodStatus")]),
    ("ListMeta", [("resourceVersion", 2, _STR, _ONE, ""), ("continue", 3, _STR, _ONE, "")]),
    ("PodList", [("metadata", 1, _MSG, _ONE, "ListMeta"), ("items", 2, _MSG, _MANY, "Pod")]),
    ("Unknown", [("raw", 2, _BYTES, _ONE, "")]),  # the envelope around every body
]


def _message_classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="tfjob/podlist.proto", package=_PACKAGE, syntax="proto2"
    )
    for name, fields in _MESSAGES:
        message = file.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".{_PACKAGE}.{type_name}"
        if name == "ObjectMeta":  # map<string, string> labels = 11
            entry = message.nested_type.add(name="LabelsEntry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=_STR, label=_ONE)
            entry.field.add(name="value", number=2, type=_STR, label=_ONE)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in ("Unknown", "PodList")
    }


_CLASSES = _message_classes()


def decode_pods(body: bytes) -> tuple[list[Pod], str, str]:
    """One list page: its pods, resourceVersion and continue token."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    raw = _CLASSES["Unknown"].FromString(body[len(MAGIC) :]).raw
    page = _CLASSES["PodList"].FromString(raw)
    meta = page.metadata
    return [_pod(item) for item in page.items], meta.resourceVersion, getattr(meta, "continue")


def _pod(message: Any) -> Pod:
    return Pod(metadata=_meta(message.metadata), status=_status(message.status))


def _meta(m: Any) -> Meta:
    intern = sys.intern
    return Meta(
        name=m.name,
        namespace=intern(m.namespace),
        uid=m.uid,
        resource_version=m.resourceVersion,
        deletion_timestamp=_rfc3339(m.deletionTimestamp)
        if m.HasField("deletionTimestamp")
        else None,
        labels={intern(k): intern(v) for k, v in m.labels.items()},
        owner_references=tuple(
            OwnerReference(
                api_version=intern(o.apiVersion),
                kind=intern(o.kind),
                name=intern(o.name),
                uid=intern(o.uid),
                controller=o.controller if o.HasField("controller") else None,
                block_owner_deletion=(
                    o.blockOwnerDeletion if o.HasField("blockOwnerDeletion") else None
                ),
            )
            for o in m.ownerReferences
        ),
    )


def _status(s: Any) -> PodStatus:
    return PodStatus(
        phase=sys.intern(s.phase) if s.HasField("phase") else "Pending",
        reason=s.reason,
        message=s.message,
        container_statuses=tuple(_container(c) for c in s.containerStatuses),
        init_container_statuses=tuple(_container(c) for c in s.initContainerStatuses),
    )


def _container(c: Any) -> ContainerStatus:
    state = c.state
    terminated = state.terminated
    waiting = state.waiting
    return ContainerStatus(
        name=c.name,
        restart_count=c.restartCount,
        state=ContainerState(
            terminated=Terminated(
                exit_code=terminated.exitCode, reason=terminated.reason, message=terminated.message
            )
            if state.HasField("terminated")
            else None,
            waiting=Waiting(reason=waiting.reason, message=waiting.message)
            if state.HasField("waiting")
            else None,
        ),
    )


def _rfc3339(moment: Any) -> str:
    """As the API's JSON writes a metav1.Time: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment.seconds))


def continue_token(head: bytes) -> str | None:
    """The continue token from the first bytes of a page ("" on the last page), or
    None while they do not hold it yet. The API server writes fields in number order:
    the envelope's type (1) before its raw bytes (2), the list's metadata (1) before
    its items (2), so the token is within the first few hundred bytes."""
    try:
        raw = _field(head, len(MAGIC), len(head), want=2)
        meta = _field(head, raw[0], raw[1], want=1) if raw else None
        if meta is None or meta[1] > len(head):
            return None
        token = _field(head, meta[0], meta[1], want=3)
    except IndexError:  # a varint cut off at the end of what is here
        return None
    return head[token[0] : token[1]].decode() if token else ""


def _field(data: bytes, at: int, end: int, *, want: int) -> tuple[int, int] | None:
    """Where length-delimited field `want` of the message in data[at:end] is, or None."""
    while at < min(end, len(data)):
        key, at = _varint(data, at)
        if key & 7 == 0:  # a number: skip it
            _value, at = _varint(data, at)
            continue
        size, at = _varint(data, at)
        if key >> 3 == want:
            return at, at + size
        at += size
    if at < end:
        raise IndexError("the message goes on past what is here")
    return None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at
