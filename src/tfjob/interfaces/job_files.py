"""Reading job files (every kind) for the command line, with every problem reported at once.

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
from tfjob.frameworks.load import load_jobs

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
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not a text file"
        raise BadInput(f"cannot read {path}: {reason}") from None
    schema_rules.cache_rule_parser()
    try:
        return load_jobs(text, str(path), require_image=require_image, kinds=kinds)
    except InvalidJob as error:
        raise BadInput(str(error)) from None


def invalid(source: str, errors: list[FieldError], kind: str = "TFJob") -> BadInput:
    """BadInput for problems found outside tfjob.api (e.g. the local pre-flight check),
    worded as validation errors are."""
    return BadInput(str(InvalidJob(source, errors, kind=kind)))
