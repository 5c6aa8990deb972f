"""Reading job files (every kind; for the cluster commands TrainJobs too) for the command
line, with every problem reported at once.

Bad input ends the command with exit status 2 and one message that names each field,
what is wrong with it and how to fix it, before anything is started.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import click

from tfjob.api import schema_rules
from tfjob.api.errors import FieldError, InvalidJob
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
