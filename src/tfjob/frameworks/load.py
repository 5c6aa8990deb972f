"""Turn YAML or JSON text into typed jobs of any kind, or one error listing every problem.

Parsing is pure: the caller reads the file. Every document is checked for apiVersion
and kind, decoded into its kind's model (`kind: TFJob` a TFJob, `kind: PyTorchJob` a
PyTorchJob, ...) and validated by its framework, then checked as the API server admits
it (for a TFJob, tfjob.api.schema_rules: the CRD's schema and CEL rules); nothing is
returned unless all documents are valid, so a runtime never starts half of a bad file.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
import yaml

from tfjob.api import constants as c
from tfjob.api.errors import FieldError, InvalidJob
from tfjob.api.types import Job, ReplicaSpec
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import FRAMEWORKS, framework_of
from tfjob.frameworks.tensorflow import TENSORFLOW

J = TypeVar("J", bound=Job)

_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


# The context of the ConstructorError the strict loader raises for a key given twice.
_DUPLICATE = "while constructing a mapping with a key given twice"


class _StrictLoader(_BASE_LOADER):  # type: ignore[valid-type,misc]
    """YAML as the API server decodes a YAML body under strict field validation: a
    key given twice in one mapping is an error (plain PyYAML keeps the last value;
    kubectl, which sends JSON, does too, so one of the two is silently lost)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            first = seen.setdefault(key, key_node) if _hashable(key) else key_node
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    _DUPLICATE,
                    None,
                    f'key "{key}" already set in map (first at line {first.start_mark.line + 1})',
                    key_node.start_mark,
                )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


# Fields that tf-operator v1.0 read from `spec` and that later versions silently ignore
# there (upstream issue #1241): rejecting them beats ignoring them.
_MOVED_TO_RUN_POLICY = (
    "cleanPodPolicy",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "backoffLimit",
)


def parse_documents(text: str, source: str) -> list[dict[str, Any]]:
    """The non-empty documents of a YAML/JSON text, each a mapping."""
    try:
        documents = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except yaml.constructor.ConstructorError as error:
        if error.context != _DUPLICATE:
            raise _not_yaml(error, source) from None
        where = error.problem_mark
        at = f"line {where.line + 1}: " if where else ""
        raise InvalidJob(
            source,
            [
                FieldError(
                    "(file)",
                    f"{at}{error.problem} (the API server refuses a YAML body with a key"
                    " twice; kubectl silently keeps the last)",
                    "keep one of them",
                )
            ],
            kind=_kind_named(text),
        ) from None
    except yaml.YAMLError as error:
        raise _not_yaml(error, source) from None
    if not documents:
        raise InvalidJob(source, [FieldError("(file)", "contains no TFJob", "add a TFJob")])
    not_mappings = [i for i, d in enumerate(documents) if not isinstance(d, dict)]
    if not_mappings:
        raise InvalidJob(
            source,
            [
                FieldError(
                    _doc_path(i, len(documents), "(document)"),
                    "is not a mapping",
                    "write a TFJob object with apiVersion, kind, metadata and spec",
                )
                for i in not_mappings
            ],
        )
    return documents


def _not_yaml(error: yaml.YAMLError, source: str) -> InvalidJob:
    where = getattr(error, "problem_mark", None)
    at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
    problem = getattr(error, "problem", None) or str(error)
    return InvalidJob(
        source,
        [FieldError("(file)", f"not valid YAML or JSON{at}: {problem}", "fix the syntax")],
    )


def _kind_named(text: str) -> str:
    """For a report on a file the strict loader refused: the one kind its documents
    name, read leniently, else TFJob."""
    try:
        kinds = {
            d.get("kind") for d in yaml.load_all(text, Loader=_BASE_LOADER) if isinstance(d, dict)
        }
    except yaml.YAMLError:
        return TENSORFLOW.kind
    named = kinds & set(FRAMEWORKS)
    return str(named.pop()) if len(named) == 1 else TENSORFLOW.kind


def load_jobs(
    text: str,
    source: str,
    *,
    require_image: bool = True,
    kinds: tuple[str, ...] | None = None,
) -> list[Job]:
    """Every job in `text`, decoded and validated; raises InvalidJob otherwise.

    `require_image` is False for the local runtime, which runs commands, not images.
    `kinds` limits the kinds accepted (a caller that runs only TFJobs); None: all.
    """
    documents = parse_documents(text, source)
    accepted = kinds if kinds is not None else tuple(FRAMEWORKS)
    jobs: list[Job] = []
    errors: list[FieldError] = []
    for index, document in enumerate(documents):
        prefix = _doc_path(index, len(documents), "")
        job, doc_errors = _admit(document, accepted, require_image=require_image)
        if job is not None:
            jobs.append(job)
        errors += [FieldError(prefix + e.path, e.message, e.fix) for e in doc_errors]
    if errors:
        named = {str(d.get("kind")) for d in documents} & set(accepted)
        raise InvalidJob(source, errors, kind=named.pop() if len(named) == 1 else accepted[0])
    return jobs


def decode_job(document: dict[str, Any], job_type: type[J]) -> J:
    """Decode one already-parsed mapping of the kind `job_type` models (e.g. from the
    API server); raises InvalidJob naming every problem."""
    framework: Framework[J] = next(f for f in FRAMEWORKS.values() if f.job_type is job_type)
    job, errors = _decode(document, (framework.kind,))
    if job is None:
        name = document.get("metadata", {}).get("name", framework.kind)
        raise InvalidJob(str(name), errors, kind=framework.kind)
    assert isinstance(job, job_type)
    return job


def _admit(
    document: dict[str, Any], kinds: tuple[str, ...], *, require_image: bool
) -> tuple[Job | None, list[FieldError]]:
    """Our own checks first (their messages are the most specific), then everything
    else the API server would refuse (the CRD's schema and rules, a superset)."""
    job, errors = _decode(document, kinds)
    if job is not None:
        errors = framework_of(job).validate(job, require_image=require_image)
    framework = FRAMEWORKS.get(str(document.get("kind")))
    if framework is None or _check_header(document, kinds):
        pass
    elif errors:
        # Add what only the schema sees (wrong types deep in a template, unknown
        # fields), not the rules' restatements of what we already said.
        seen = {e.path for e in errors}
        extra = framework.admission(document, require_image=require_image, rules=False)
        errors += [e for e in extra if e.path not in seen]
    else:
        errors = framework.admission(document, require_image=require_image, rules=True)
    return (None, errors) if errors else (job, [])


def _decode(
    document: dict[str, Any], kinds: tuple[str, ...]
) -> tuple[Job | None, list[FieldError]]:
    errors = _check_header(document, kinds)
    if errors:
        return None, errors
    framework = FRAMEWORKS[document["kind"]]
    spec = document.get("spec")
    if isinstance(spec, dict):
        own = {f.encode_name for f in msgspec.structs.fields(type(framework.job_type().spec))}
        errors += [
            FieldError(
                f"spec.{name}",
                "is not a field of spec in kubeflow.org/v1 (it was in tf-operator v1.0)",
                f"move it to spec.runPolicy.{name}",
            )
            for name in _MOVED_TO_RUN_POLICY
            if name in spec and name not in own  # (MPIJob still has cleanPodPolicy)
        ]
    field = framework.spec_field
    specs = spec.get(field) if isinstance(spec, dict) else None
    if isinstance(specs, dict):
        # Convert each replica spec on its own: msgspec's error paths do not name map
        # keys, and one bad replica type must not hide the others' errors.
        errors += [
            _from_msgspec(error, f"spec.{field}[{key}]")
            for key, error in _replica_errors(specs).items()
        ]
    if errors:
        return None, errors
    try:
        job = msgspec.convert(document, framework.job_type)
    except msgspec.ValidationError as error:
        return None, [_from_msgspec(error)]
    return job, []


def _replica_errors(specs: dict[str, Any]) -> dict[str, msgspec.ValidationError]:
    found = {}
    for key, value in specs.items():
        try:
            msgspec.convert(value, ReplicaSpec)
        except msgspec.ValidationError as error:
            found[str(key)] = error
    return found


def _check_header(document: dict[str, Any], kinds: tuple[str, ...]) -> list[FieldError]:
    errors = []
    if document.get("apiVersion") != c.API_VERSION:
        errors.append(
            FieldError(
                "apiVersion",
                f"must be {c.API_VERSION!r}, got {document.get('apiVersion')!r}",
                f"set apiVersion: {c.API_VERSION}",
            )
        )
    if document.get("kind") not in kinds:
        expected = repr(kinds[0]) if len(kinds) == 1 else f"one of {', '.join(map(repr, kinds))}"
        errors.append(
            FieldError(
                "kind",
                f"must be {expected}, got {document.get('kind')!r}",
                f"set kind: {kinds[0]}"
                if len(kinds) == 1
                else f"set kind to one of {', '.join(kinds)}",
            )
        )
    return errors


_MSGSPEC_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def _from_msgspec(error: msgspec.ValidationError, base: str = "") -> FieldError:
    """Translate msgspec's `Expected int, got str - at $.spec...` into a FieldError."""
    text = str(error)
    match = _MSGSPEC_PATH.search(text)
    path = base or "(document)"
    if match:
        text = text[: match.start()]
        path = base + _render_path(match.group("path"), bool(base))
    return FieldError(path, text[0].lower() + text[1:], "use a value of the expected type")


def _render_path(raw: str, nested: bool) -> str:
    """`.spec.runPolicy.backoffLimit` -> `spec.runPolicy.backoffLimit` (or `.x` nested)."""
    path = re.sub(r"\['([^']*)'\]", r"[\1]", raw)
    if nested:
        return path
    return path.lstrip(".") or "(document)"


def _doc_path(index: int, count: int, rest: str) -> str:
    return f"document {index + 1}: {rest}" if count > 1 else rest
