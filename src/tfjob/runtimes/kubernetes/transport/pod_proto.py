"""Pod list pages as protobuf, decoded in C into the pod projection.

The pods informer asks for its list pages as protobuf, which costs the API server
about half the CPU of JSON (docs/decisions/0010-pods-listed-as-protobuf.md). The `protobuf`
package's C core (upb) decodes each page into messages that declare only the fields
of the pod projection, under the Kubernetes API's field numbers, so every other field
(the pod spec, managedFields, ...) is skipped in C.

Nothing here restates the projection: `api/observed.py` declares each field once, with
its protobuf number (`pb`), and `PageDecoder` builds from those structs, once:
- the message descriptor (no `.proto` file, no code generator at build time), and
- one converter per struct, from its message to the struct: one constructor call
  reading each field, interning the shared strings (as decode.py does for JSON) and
  writing times as `api/timestamps.py` does. Their source is generated
  (`PageDecoder.source`; `python -m tfjob.runtimes.kubernetes.transport.pod_proto` prints the
  pods'), so they run as fast as hand-written ones.
Only the list's envelope (`_ENVELOPE`: PodList, ListMeta, Time) is declared here;
runtime.Unknown around it is read by `_field`.

Only lists come as protobuf; watch events stay JSON (one pod at a time).
tests/kubernetes/operator/test_pod_proto.py decodes a protobuf page and a JSON page
the API server wrote at the same resourceVersion (tests/fixtures/pods/) into equal
projections.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import msgspec
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from tfjob.api.observed import Column, Pod, table
from tfjob.api.timestamps import rfc3339
from tfjob.runtimes.kubernetes.transport.decode import MAGIC, PROTOBUF

__all__ = [
    "MAGIC",
    "PROTOBUF",
    "DecodeError",
    "PageDecoder",
    "continue_token",
    "decode_pods",
]


T = TypeVar("T", bound=msgspec.Struct)
_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tfjob.podlist"
_SCALARS: dict[type[Any], int] = {
    str: _F.TYPE_STRING,
    int: _F.TYPE_INT64,  # reads int32 fields too: the same varint, negatives alike
    bool: _F.TYPE_BOOL,
}
_ZERO: dict[type[Any], Any] = {str: "", int: 0, bool: False}  # a scalar absent on the wire

_ROOT = "*"  # in the envelope: the message of the listed struct (Pod)
# The envelope around the pods: (message, [(field, number, type, message type)]).
_ENVELOPE: list[tuple[str, list[tuple[str, int, int, str]]]] = [
    ("Time", [("seconds", 1, _F.TYPE_INT64, ""), ("nanos", 2, _F.TYPE_INT32, "")]),
    ("ListMeta", [("resourceVersion", 2, _F.TYPE_STRING, ""), ("continue", 3, _F.TYPE_STRING, "")]),
    # PodList, whose items (repeated) are the listed struct's message
    ("List", [("metadata", 1, _F.TYPE_MESSAGE, "ListMeta"), ("items", 2, _F.TYPE_MESSAGE, _ROOT)]),
]

Structs = dict[type[msgspec.Struct], list[Column]]


def _structs(root: type[msgspec.Struct]) -> Structs:
    """Every struct reachable from `root`, with its fields."""
    found: Structs = {}

    def visit(struct: type[msgspec.Struct]) -> None:
        if struct not in found:
            found[struct] = table(struct)
            for column in found[struct]:
                if issubclass(column.kind, msgspec.Struct):
                    visit(column.kind)

    visit(root)
    return found


def _descriptor(structs: Structs, root: type[msgspec.Struct]) -> Any:
    """The file of messages: one per struct, and the envelope of a list of `root`."""
    file = descriptor_pb2.FileDescriptorProto(
        name="tfjob/podlist.proto", package=_PACKAGE, syntax="proto2"
    )

    def add(
        message: Any, name: str, number: int, kind: int, of: str = "", many: bool = False
    ) -> None:
        label = _F.LABEL_REPEATED if many else _F.LABEL_OPTIONAL
        field = message.field.add(name=name, number=number, type=kind, label=label)
        if of:
            field.type_name = f".{_PACKAGE}.{of}"

    for struct, columns in structs.items():
        message = file.message_type.add(name=struct.__name__)
        for c in columns:
            if c.kind is dict:  # map<string, string>: a repeated key-value entry message
                entry = message.nested_type.add(name=f"{c.name}Entry")
                entry.options.map_entry = True
                add(entry, "key", 1, _F.TYPE_STRING)
                add(entry, "value", 2, _F.TYPE_STRING)
                add(
                    message,
                    c.name,
                    c.number,
                    _F.TYPE_MESSAGE,
                    f"{struct.__name__}.{c.name}Entry",
                    True,
                )
            elif c.time:
                add(message, c.name, c.number, _F.TYPE_MESSAGE, "Time", c.repeated)
            elif issubclass(c.kind, msgspec.Struct):
                add(message, c.name, c.number, _F.TYPE_MESSAGE, c.kind.__name__, c.repeated)
            else:
                add(message, c.name, c.number, _SCALARS[c.kind], "", c.repeated)
    for name, fields in _ENVELOPE:
        message = file.message_type.add(name=name)
        for field, number, kind, of in fields:
            add(message, field, number, kind, root.__name__ if of == _ROOT else of, of == _ROOT)
    return file


def _converters_source(root: type[msgspec.Struct], structs: Structs) -> str:
    """Python source of a function per struct that is the root or an item of a list
    (`_Pod(message) -> Pod`, `_ContainerStatus`, ...); a struct held once is built
    inline, reading its message from a local variable."""
    items = [c.kind for columns in structs.values() for c in columns if c.repeated]
    functions = [root, *dict.fromkeys(k for k in items if issubclass(k, msgspec.Struct))]
    lines: list[str] = []
    for struct in functions:
        body: list[str] = []
        built = _build(struct, "m", structs, body, "    ")
        lines += [f"def _{struct.__name__}(m):", *body, f"    return {built}", "", ""]
    return "\n".join(lines)


def _build(
    struct: type[msgspec.Struct], m: str, structs: Structs, body: list[str], indent: str
) -> str:
    """The constructor call of `struct` from message variable `m`; the lines that bind
    the messages it holds once to variables go to `body`."""
    args: list[str] = []
    for c in structs[struct]:
        value = f"{m}.{c.name}"
        if c.kind is dict:
            read = "{_intern(k): _intern(v)" if c.shared else "{k: v"
            args.append(f"{read} for k, v in {value}.items()}}")
            continue
        if c.repeated:
            convert = f"_{c.kind.__name__}" if issubclass(c.kind, msgspec.Struct) else ""
            args.append(f"tuple([{convert}(v) for v in {value}])")
            continue
        if issubclass(c.kind, msgspec.Struct):
            inner = f"m{len(body) + 1}"
            body.append(f"    {inner} = {value}")
            value = _build(c.kind, inner, structs, body, indent + "    ")
        elif c.time:
            value = f"_time({value})"
        elif c.shared:
            value = f"_intern({value})"
        if c.optional or c.time or (c.kind in _ZERO and c.default != _ZERO[c.kind]):
            # absent on the wire: the struct's default (None, "Pending"), not the zero value
            value = f"({value} if {m}.HasField({c.name!r}) else {c.default!r})"
        args.append(value)
    inside = "".join(
        f"\n{indent}    {c.name}={arg}," for c, arg in zip(structs[struct], args, strict=True)
    )
    return f"{struct.__name__}({inside}\n{indent})"


def _time(moment: Any) -> str:
    """A metav1.Time as the API's JSON writes it (whole seconds)."""
    return rfc3339(datetime.fromtimestamp(moment.seconds, UTC))


class PageDecoder(Generic[T]):
    """Decodes a protobuf list page of `root` (Pod) into `root` structs, with the
    messages and converters generated from `root` and the structs it holds."""

    def __init__(self, root: type[T]) -> None:
        structs = _structs(root)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(_descriptor(structs, root))

        def message(name: str) -> Any:
            return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))

        self._list = message("List")
        self.source = _converters_source(root, structs)
        filename = f"<pod_proto converters of {root.__name__}>"  # for tracebacks
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        scope: dict[str, Any] = {struct.__name__: struct for struct in structs}
        scope |= {"_time": _time, "_intern": sys.intern}
        exec(compile(self.source, filename, "exec"), scope)  # the source made just above
        self._convert: Callable[[Any], T] = scope[f"_{root.__name__}"]

    def decode(self, body: bytes) -> tuple[list[T], str, str]:
        """One list page: its objects, resourceVersion and continue token."""
        if not body.startswith(MAGIC):
            raise ValueError("not a Kubernetes protobuf body")
        # The list is the envelope's raw bytes (field 2): parsed where it lies in
        # `body`, not copied out of it.
        try:
            raw = _field(body, len(MAGIC), len(body), want=2)
        except IndexError:  # a varint cut off
            raw = None
        if raw is None or raw[1] > len(body):
            raise DecodeError("a protobuf body without the whole list")
        page = self._list.FromString(memoryview(body)[raw[0] : raw[1]])
        meta = page.metadata
        convert = self._convert
        return (
            [convert(item) for item in page.items],
            meta.resourceVersion,
            getattr(meta, "continue"),
        )


_PODS = PageDecoder(Pod)
decode_pods = _PODS.decode


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


if __name__ == "__main__":
    print(_PODS.source)
