"""Slim projections of the Kubernetes objects the decision core observes.

Both runtimes describe what exists in these shapes: the Kubernetes runtime decodes pods
and services from the API server's JSON straight into them (msgspec skips every field
not named here, which keeps the informer cache small), and the local runtime builds
them from its processes, the way a kubelet reports pod status. The field names follow
the Kubernetes wire format, so a projection is a faithful subset of a real Pod.

The operator caches one of these per pod and service it owns (80,000 at 10,000 jobs
of 4 workers), so they are kept small: only fields something reads (no
creationTimestamp), tuples for the lists (an absent list is the one shared empty
tuple, where an empty list default is a new 56-byte list per object), and no garbage
collector tracking (`gc=False`: decoded data holds no reference cycles, and the
collector never has to walk the cache).

These structs are also the one declaration of the projection's protobuf form: each
field carries its number in the Kubernetes API's protobuf messages (`pb`), and
`runtimes/kubernetes/transport/pod_proto.py` builds its message descriptor and its converters
from them. A field added here, with its number, is read from JSON and protobuf alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from tfjob.api.wire import Wire


def pb(number: int, *, time: bool = False, shared: bool = False) -> msgspec.Meta:
    """A field's entry in the table: its number in the Kubernetes API's protobuf
    message (k8s.io/api's generated.proto); `time`: a metav1.Time there (seconds,
    nanos), an RFC 3339 string here; `shared`: strings many cached objects repeat
    (namespace, labels, owner, phase), which the decoders intern so each is held once.
    Metadata only: msgspec decodes and encodes the field as its type says."""
    return msgspec.Meta(extra={"protobuf": number, "time": time, "shared": shared})


class Observed(Wire, gc=False):
    """Base of the projections: untracked by the garbage collector (no cycles)."""


class OwnerReference(Observed):
    api_version: Annotated[str, pb(5, shared=True)] = ""
    kind: Annotated[str, pb(1, shared=True)] = ""
    name: Annotated[str, pb(3, shared=True)] = ""
    uid: Annotated[str, pb(4, shared=True)] = ""
    controller: Annotated[bool, pb(6)] | None = None
    block_owner_deletion: Annotated[bool, pb(7)] | None = None


class Meta(Observed):
    name: Annotated[str, pb(1)] = ""
    namespace: Annotated[str, pb(3, shared=True)] = ""
    uid: Annotated[str, pb(5)] = ""
    resource_version: Annotated[str, pb(6)] = ""
    deletion_timestamp: Annotated[str, pb(9, time=True)] | None = None
    labels: Annotated[dict[str, str], pb(11, shared=True)] = {}
    owner_references: Annotated[tuple[OwnerReference, ...], pb(13)] = ()

    def controller_uid(self) -> str | None:
        """UID of the controlling owner, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref.uid
        return None


class Terminated(Observed):
    exit_code: Annotated[int, pb(1)] = 0
    reason: Annotated[str, pb(3)] = ""
    message: Annotated[str, pb(4)] = ""


class Waiting(Observed):
    reason: Annotated[str, pb(1)] = ""
    message: Annotated[str, pb(2)] = ""


class ContainerState(Observed):
    terminated: Annotated[Terminated, pb(3)] | None = None
    waiting: Annotated[Waiting, pb(1)] | None = None


class ContainerStatus(Observed):
    name: Annotated[str, pb(1)] = ""
    restart_count: Annotated[int, pb(5)] = 0
    state: Annotated[ContainerState, pb(2)] = msgspec.field(default_factory=ContainerState)
    # Read for one mark only: the kubelet's `ContainerStatusUnknown` (core/pods.py).
    last_state: Annotated[ContainerState, pb(3)] | None = None


class PodStatus(Observed):
    phase: Annotated[str, pb(1, shared=True)] = "Pending"
    reason: Annotated[str, pb(4)] = ""
    message: Annotated[str, pb(3)] = ""
    container_statuses: Annotated[tuple[ContainerStatus, ...], pb(8)] = ()
    init_container_statuses: Annotated[tuple[ContainerStatus, ...], pb(10)] = ()


class Pod(Observed):
    metadata: Annotated[Meta, pb(1)] = msgspec.field(default_factory=Meta)
    status: Annotated[PodStatus, pb(3)] = msgspec.field(default_factory=PodStatus)

    def container_status(self, name: str) -> ContainerStatus | None:
        """The status of the container called `name` (a kind's training container:
        `tensorflow`, `pytorch`, ...), if it has one yet."""
        for status in self.status.container_statuses:
            if status.name == name:
                return status
        return None


class Service(Observed):
    metadata: Annotated[Meta, pb(1)] = msgspec.field(default_factory=Meta)


class OwnedObject(msgspec.Struct, kw_only=True):
    """An object besides pods and services that a job owns (an MPIJob's ConfigMap, a
    PyTorchJob's HorizontalPodAutoscaler: `api.kinds.OwnedKind`), as observed: its
    metadata projected like a pod's (to index it by job), and the whole object as the
    API server returned it, without managedFields and status. Few exist (a handful
    per job of the kinds that own any), so they are kept whole."""

    metadata: Meta
    document: dict[str, Any]

    @classmethod
    def of(cls, document: dict[str, Any], *, with_status: bool = False) -> OwnedObject:
        """From an object's decoded JSON; its status kept only `with_status` (a gang
        group's phase is read, an owned object's status never is)."""
        meta = {k: v for k, v in (document.get("metadata") or {}).items() if k != "managedFields"}
        kept = {k: v for k, v in document.items() if with_status or k != "status"}
        kept["metadata"] = meta
        return cls(metadata=msgspec.convert(meta, Meta, strict=False), document=kept)

    @property
    def kind(self) -> str:
        return str(self.document.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.document.get("apiVersion", ""))


@dataclass(frozen=True)
class Column:
    """One field of a projection struct, as the table (`pb`) and its type declare it."""

    name: str
    number: int
    kind: type[Any]  # str, int, bool, dict (of str to str) or a projection struct
    default: Any  # the struct's default; for a protobuf field absent on the wire
    optional: bool  # `X | None`
    repeated: bool  # `tuple[X, ...]`
    time: bool
    shared: bool


_KINDS: dict[type[Any], type[Any]] = {
    msgspec.inspect.StrType: str,
    msgspec.inspect.IntType: int,
    msgspec.inspect.BoolType: bool,
}


def table(struct: type[msgspec.Struct]) -> list[Column]:
    """The fields of a projection struct; TypeError for one without its `pb` entry or
    of a type the table has no protobuf form for."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return [_column(field) for field in info.fields]


def _column(field: msgspec.inspect.Field) -> Column:
    kind: Any = field.type
    optional = isinstance(kind, msgspec.inspect.UnionType)  # X | None
    if optional:
        (kind,) = [t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType)]
    extra = kind.extra if isinstance(kind, msgspec.inspect.Metadata) else None
    if not extra or "protobuf" not in extra:
        raise TypeError(f"{field.name}: no protobuf number (observed.pb)")
    kind = kind.type
    repeated = isinstance(kind, msgspec.inspect.VarTupleType)
    if repeated:
        kind = kind.item_type
    if isinstance(kind, msgspec.inspect.StructType):
        python: type[Any] = kind.cls
    elif isinstance(kind, msgspec.inspect.DictType) and all(
        isinstance(t, msgspec.inspect.StrType) for t in (kind.key_type, kind.value_type)
    ):
        python = dict
    elif type(kind) in _KINDS:
        python = _KINDS[type(kind)]
    else:
        raise TypeError(f"{field.name}: no protobuf form for {kind}")
    if extra["time"] and python is not str:
        raise TypeError(f"{field.name}: a time is a str")
    return Column(
        field.name,
        extra["protobuf"],
        python,
        field.default,
        optional,
        repeated,
        extra["time"],
        extra["shared"],
    )
