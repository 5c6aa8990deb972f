"""The API server's admission checks for a job of any kind with a CRD, in Python.

Each kind's CRD (manifests/base/crd.yaml for TFJob, pytorchjob-crd.yaml, ...) and the
package's schema/<kind>-v1.json are generated together by tools/crd/generate.py, so
this module applies exactly what a cluster applies when such a job is created: the
structural OpenAPI schema (with Kubernetes' PodTemplateSpec inside every replica
template) through `jsonschema`, and the CEL rules (`x-kubernetes-validations`) through
`cel-python`. `tfjob run` therefore refuses the files a cluster refuses, with the same
field paths. A framework names its schema file (`TFJOB_SCHEMA`, `PYTORCHJOB_SCHEMA`).

Kubernetes semantics kept on top of JSON Schema:
- null values are dropped before validation (the API server prunes them: the schema
  has no nullable field);
- an unknown field is an error, as `kubectl apply` makes it (strict field validation);
- `x-kubernetes-list-type: map | set` lists may not repeat a key or a value;
- a CEL rule runs only where its value is present; rules that compare with `oldSelf`
  (updates) never apply to a new job.
One rule is skipped on request (`require_image=False`): every container needing an
image, which the local runtime does not use (it runs the container's command).

Both libraries are imported and the rules compiled on first use, so commands that do
not validate a job pay nothing for them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from tfjob.api.errors import FieldError

TFJOB_SCHEMA = "tfjob-v1.json"
PYTORCHJOB_SCHEMA = "pytorchjob-v1.json"
JAXJOB_SCHEMA = "jaxjob-v1.json"
XGBOOSTJOB_SCHEMA = "xgboostjob-v1.json"
PADDLEJOB_SCHEMA = "paddlejob-v1.json"
MPIJOB_SCHEMA = "mpijob-v1.json"


def check(
    document: Mapping[str, Any],
    schema_file: str = TFJOB_SCHEMA,
    *,
    require_image: bool = True,
    rules: bool = True,
) -> list[FieldError]:
    """Every problem the API server would report on creating `document` with the CRD
    whose schema is `schema_file` (only the schema's when `rules` is False)."""
    value = _without_nulls(document)
    schema = schema_document(schema_file)
    errors = list(_schema_errors(value, schema))
    if not rules:
        return errors
    # The API server runs the rules too when the schema fails; a rule that cannot even
    # be evaluated on a value of the wrong type adds nothing to the schema's errors.
    for error, evaluated in _rule_errors(value, schema, "", require_image=require_image):
        if (evaluated or not errors) and error not in errors:
            errors.append(error)
    return errors


@functools.cache
def schema_document(schema_file: str = TFJOB_SCHEMA) -> dict[str, Any]:
    """A kind's openAPIV3Schema shipped in this package (kubeflow.org/v1 TFJob's by
    default)."""
    text = resources.files("tfjob.api").joinpath("schema", schema_file).read_text()
    return dict(json.loads(text))


_INT64 = range(-(2**63), 2**63)


def _without_nulls(value: Any) -> Any:
    """The document as the API server decodes it: nulls pruned, and an integer that
    does not fit in 64 bits read as a number with a fraction (Go's JSON decoder makes
    it a float64), which every integer field then refuses by its type."""
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        return float(value)
    return value


# -- the structural schema -------------------------------------------------------------


def _schema_errors(value: Any, schema: dict[str, Any]) -> Iterator[FieldError]:
    validator = _validator_class()(schema)
    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path))):
        yield _field_error(error, schema)


@functools.cache
def _validator_class() -> Any:
    """Draft 4 (OpenAPI v3.0's base) plus the Kubernetes keywords."""
    import jsonschema
    from jsonschema import validators

    base = jsonschema.Draft4Validator
    return validators.extend(
        base,
        {
            "properties": _properties(base.VALIDATORS["properties"]),
            "x-kubernetes-list-type": _list_type,
        },
    )


def _properties(default: Any) -> Any:
    def properties(validator: Any, props: Any, instance: Any, schema: Any) -> Iterator[Any]:
        yield from default(validator, props, instance, schema)
        if not validator.is_type(instance, "object") or "additionalProperties" in schema:
            return
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        from jsonschema.exceptions import ValidationError

        for name in instance:
            if name not in props:
                yield ValidationError(
                    f"{name!r} is an unknown field", path=[name], validator="unknown"
                )

    return properties


def _list_type(validator: Any, kind: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "array") or kind not in ("map", "set"):
        return
    from jsonschema.exceptions import ValidationError

    keys = schema.get("x-kubernetes-list-map-keys", [])
    seen: dict[str, int] = {}
    for index, item in enumerate(instance):
        if kind == "map" and not isinstance(item, dict):
            continue
        key = {k: item.get(k) for k in keys} if kind == "map" else item
        token = json.dumps(key, sort_keys=True)
        if token in seen:
            yield ValidationError(
                f"duplicate value {key!r} (also at index {seen[token]})",
                path=[index],
                validator="duplicate",
            )
        seen.setdefault(token, index)


def _field_error(error: Any, schema: dict[str, Any]) -> FieldError:
    path = list(error.absolute_path)
    kind, detail = error.validator, error.validator_value
    if kind == "required":
        missing = str(error.message).split("'")[1]
        return FieldError(_render(schema, [*path, missing]), "is required", f"add {missing}")
    where = _render(schema, path)
    got = _short(error.instance)
    if kind == "type" or kind == "anyOf":
        wanted = _TYPE_WORDS.get(detail, "an integer or a string")
        field = str(path[-1]) if path else ""
        fix = _LIST_FIX.format(field) if field in ("command", "args") else f"write {wanted}"
        return FieldError(where, f"must be {wanted}, got {got}", fix)
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in detail)
        return FieldError(where, f"unsupported value {got}", f"use one of {allowed}")
    if kind == "pattern" and error.schema.get("x-kubernetes-int-or-string"):
        return FieldError(where, f"{got} is not a quantity", "write e.g. 500m, 2, 1.5 or 4Gi")
    if kind == "unknown":
        return FieldError(
            _render(schema, [*path, *error.relative_path][: len(path)]),
            "is not a field of this object",
            "remove it or fix its spelling",
        )
    fixes = {
        "minimum": f"use {detail} or more",
        "maximum": f"use {detail} or less",
        "minProperties": f"add at least {detail} entry",
        "maxProperties": f"keep at most {detail} entries",
        "maxItems": f"keep at most {detail} items",
        "duplicate": "give every item a different key",
    }
    return FieldError(where, _message(error), fixes.get(kind, "correct the value"))


_TYPE_WORDS = {
    "array": "a list",
    "object": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}
_LIST_FIX = "write one item per word, e.g. {0}: [python3, train.py]"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(error: Any) -> str:
    text = str(error.message)
    return text[0].lower() + text[1:] if text else text


def _render(schema: dict[str, Any], path: list[Any]) -> str:
    """`spec`, `tfReplicaSpecs`, `Worker`, `template` -> spec.tfReplicaSpecs[Worker].template."""
    text = ""
    node: dict[str, Any] | None = schema
    for part in path:
        props = node.get("properties", {}) if node else {}
        if isinstance(part, int):
            text += f"[{part}]"
            node = node.get("items") if node else None
        elif part in props:
            text += f".{part}"
            node = props[part]
        elif node and isinstance(node.get("additionalProperties"), dict):
            text += f"[{part}]"
            node = node["additionalProperties"]
        else:
            text += f".{part}"
            node = None
    return text.lstrip(".") or "(document)"


# -- the CEL rules ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    program: Any
    message: str
    field_path: str
    about_image: bool  # the one rule the local runtime skips


_Found = tuple[FieldError, bool]  # (a rule that does not hold, whether it evaluated)


def _rule_errors(
    value: Any, schema: dict[str, Any], path: str, *, require_image: bool
) -> Iterator[_Found]:
    rules = schema.get("x-kubernetes-validations")
    activation = _activation(value) if rules else {}
    for rule in _rules(json.dumps(rules)) if rules else ():
        if rule.about_image and not require_image:
            continue
        holds = _holds(rule, activation)
        if holds is not True:
            where = (path + rule.field_path).lstrip(".") or "(document)"
            yield FieldError(where, *_split(rule)), holds is False
    yield from _child_rule_errors(value, schema, path, require_image=require_image)


def _child_rule_errors(
    value: Any, schema: dict[str, Any], path: str, *, require_image: bool
) -> Iterator[_Found]:
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in props:
                yield from _rule_errors(
                    child, props[key], f"{path}.{key}", require_image=require_image
                )
            elif isinstance(extra, dict):
                yield from _rule_errors(child, extra, f"{path}[{key}]", require_image=require_image)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _rule_errors(
                item, schema["items"], f"{path}[{index}]", require_image=require_image
            )


@functools.cache
def _rules(serialized: str) -> tuple[_Rule, ...]:
    """The compiled rules of one schema node (cached by their JSON text)."""
    found = []
    for entry in json.loads(serialized):
        if "oldSelf" in entry["rule"]:
            continue
        program = _environment().program(_environment().compile(entry["rule"]))
        message = entry.get("message") or f"failed rule: {entry['rule']}"
        about_image = ".image" in entry["rule"]
        found.append(_Rule(program, message, entry.get("fieldPath", ""), about_image))
    return tuple(found)


_parser_cache = False


def cache_rule_parser() -> None:
    """Let the CEL parser's tables be cached in a temporary file (by `lark`).

    Building cel-python's LALR parser costs ~0.25 s of CPU on every start; loaded from
    the cache it costs ~0.02 s. Opt-in, so this module itself writes nothing: the
    command line turns it on.
    """
    global _parser_cache
    _parser_cache = True


@functools.cache
def _environment() -> Any:
    import celpy

    if _parser_cache:
        _cached_parser()
    return celpy.Environment()


def _cached_parser() -> None:
    """Install cel-python's parser (`CELParser.CEL_PARSER`, built once per process by
    the library otherwise) with the same settings plus lark's cache."""
    import re

    import celpy
    import lark
    from celpy.celparser import CELParser

    if CELParser.CEL_PARSER is not None:
        return
    grammar = resources.files("celpy").joinpath("cel.lark").read_text()
    try:
        CELParser.CEL_PARSER = lark.Lark(
            grammar,
            parser="lalr",
            start="expr",
            debug=True,
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": CELParser.ambiguous_literals},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
            tree_class=celpy.InterpretedRunner.tree_node_class,
            cache=True,
        )
    except (lark.exceptions.LarkError, OSError):
        CELParser.CEL_PARSER = None  # cel-python builds its own


def _activation(value: Any) -> dict[str, Any]:
    """The CEL variables for the rules of one node (converted once for all of them)."""
    from celpy.adapter import json_to_cel

    return {"self": json_to_cel(value)}


def _holds(rule: _Rule, activation: dict[str, Any]) -> bool | None:
    """Whether the rule holds; None when it cannot be evaluated on this value."""
    from celpy.celtypes import BoolType
    from celpy.evaluation import CELEvalError

    try:
        result = rule.program.evaluate(activation)
    except (CELEvalError, TypeError, ValueError, KeyError, AttributeError):
        return None
    return bool(result) if isinstance(result, BoolType) else None


def _split(rule: _Rule) -> tuple[str, str]:
    """A rule's message is written `<what is wrong>: <the fix>`."""
    what, _, fix = rule.message.rpartition(": ")
    return (what, fix) if what else (rule.message, "")
