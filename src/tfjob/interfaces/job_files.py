"""Reading job files (every kind; for the cluster commands TrainJobs too) for the command
line, with every problem reported at once.

Bad input ends the command with exit status 2 and one message that names each field,
what is wrong with it and how to fix it, before anything is started.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click
import yaml

from tfjob.api import schema_rules, trainjob
from tfjob.api.errors import FieldError, InvalidJob
from tfjob.api.trainjob import TrainJob, decode_trainjob
from tfjob.api.types import Job
from tfjob.frameworks.load import load_jobs, parse_documents
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.interfaces.cluster_client.kinds import CLUSTER_KINDS, kind_called

EXIT_BAD_INPUT = 2


class BadInput(click.ClickException):
    """Input tfjob cannot use: printed as is, exit status 2."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"tfjob: {self.format_message()}", err=True)


def read_jobs(
    path: Path, *, require_image: bool, kinds: tuple[str, ...] | None = None
) -> list[Job]:
    """Every job in the file at `path`, or BadInput naming every problem. `kinds`
    limits the kinds accepted (others are refused by name); None: every kind tfjob
    knows."""
    text = _text(path)
    schema_rules.cache_rule_parser()
    try:
        return load_jobs(text, str(path), require_image=require_image, kinds=kinds)
    except InvalidJob as error:
        raise BadInput(str(error)) from None


def read_cluster_jobs(path: Path, *, require_image: bool) -> list[dict[str, Any]]:
    """Every document in the file at `path`, each a job of a kind the cluster commands
    take (the v1 kinds, and TrainJob), as written; or BadInput naming every problem.

    A file of v1 jobs only is read as `read_jobs` reads it (the same checks as
    `tfjob run`). Otherwise each document is checked by its kind (a TrainJob by its
    CRD's schema and rules), its problems prefixed with the document's number."""
    text = _text(path)
    try:
        documents = parse_documents(text, str(path))
    except InvalidJob as error:
        raise BadInput(str(error)) from None
    kinds = [kind_called(str(d.get("kind"))) for d in documents]
    if all(k is None or k.kind in FRAMEWORKS for k in kinds):
        read_jobs(path, require_image=require_image)
        return documents
    errors: list[FieldError] = []
    for index, (document, kind) in enumerate(zip(documents, kinds, strict=True)):
        prefix = f"document {index + 1}: " if len(documents) > 1 else ""
        if kind is None:
            known = ", ".join(k.kind for k in CLUSTER_KINDS)
            found = [FieldError("kind", f"must be one of {known}", "set kind to one of them")]
        else:
            found = kind.admission(document, str(path), require_image=require_image)
        errors += [FieldError(prefix + e.path, e.message, e.fix) for e in found]
    if errors:
        named = {k.kind for k in kinds if k is not None}
        raise BadInput(str(InvalidJob(str(path), errors, kind=" or ".join(sorted(named)))))
    return documents


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not a text file"
        raise BadInput(f"cannot read {path}: {reason}") from None


def invalid(source: str, errors: list[FieldError], kind: str = "TFJob") -> BadInput:
    """BadInput for problems found outside tfjob.api (e.g. the local pre-flight check),
    worded as validation errors are."""
    return BadInput(str(InvalidJob(source, errors, kind=kind)))


# -- Kubeflow Trainer's TrainJob and its runtimes ---------------------------------------

TRAINER_KINDS = {
    trainjob.KIND: schema_rules.TRAINJOB_SCHEMA,
    trainjob.TRAINING_RUNTIME: schema_rules.TRAININGRUNTIME_SCHEMA,
    trainjob.CLUSTER_TRAINING_RUNTIME: schema_rules.CLUSTERTRAININGRUNTIME_SCHEMA,
}


@dataclass(frozen=True)
class TrainerFile:
    """A file's TrainJobs and the runtimes given with them (as documents)."""

    trainjobs: list[TrainJob]
    runtimes: list[dict[str, Any]]


def holds_trainjob(path: Path) -> bool:
    """Whether the file holds a Trainer document (trainer.kubeflow.org): it is then
    read with read_trainer_file, else with read_jobs."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return f"{trainjob.GROUP}/" in text and any(
        str(d.get("apiVersion", "")).startswith(f"{trainjob.GROUP}/")
        for d in _lenient_documents(text)
    )


def read_trainer_file(path: Path, *, require_image: bool) -> TrainerFile:
    """The TrainJobs and runtimes of the file, each checked as `kubectl apply` checks
    it (the generated CRD schemas and their CEL rules), or BadInput naming every
    problem. `require_image` False: the local runtime, which runs commands."""
    text = _read(path)
    schema_rules.cache_rule_parser()
    try:
        documents = parse_documents(text, str(path))
    except InvalidJob as error:
        raise BadInput(str(error)) from None
    errors: list[FieldError] = []
    for index, document in enumerate(documents):
        prefix = f"document {index + 1}: " if len(documents) > 1 else ""
        errors += [
            FieldError(prefix + e.path, e.message, e.fix)
            for e in _trainer_errors(document, require_image=require_image)
        ]
    if errors:
        raise BadInput(str(InvalidJob(str(path), errors, kind=trainjob.KIND)))
    return TrainerFile(
        trainjobs=[decode_trainjob(d) for d in documents if d.get("kind") == trainjob.KIND],
        runtimes=[d for d in documents if d.get("kind") != trainjob.KIND],
    )


def read_runtimes(path: Path) -> list[dict[str, Any]]:
    """The runtimes of a `--runtime FILE` (TrainingRuntime or ClusterTrainingRuntime
    documents only), checked as `kubectl apply` checks them."""
    found = read_trainer_file(path, require_image=False)
    if found.trainjobs:
        raise BadInput(f"{path} holds a TrainJob; --runtime takes runtimes only")
    return found.runtimes


def _trainer_errors(document: dict[str, Any], *, require_image: bool) -> list[FieldError]:
    kind = str(document.get("kind"))
    if document.get("apiVersion") != trainjob.API_VERSION or kind not in TRAINER_KINDS:
        return [
            FieldError(
                "kind",
                f"must be a {trainjob.API_VERSION} {', '.join(TRAINER_KINDS)}, got "
                f"{document.get('apiVersion')!r} {document.get('kind')!r}",
                "put each TrainJob in a file of its own, with its runtimes only",
            )
        ]
    return schema_rules.check(document, TRAINER_KINDS[kind], require_image=require_image)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not a text file"
        raise BadInput(f"cannot read {path}: {reason}") from None


def _lenient_documents(text: str) -> list[dict[str, Any]]:
    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError:
        return []
