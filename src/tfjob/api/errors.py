"""Errors about bad input: each names the field, what is wrong, and how to fix it."""

from __future__ import annotations

import msgspec


class FieldError(msgspec.Struct, frozen=True):
    """One problem with one field of a TFJob."""

    path: str  # e.g. "spec.tfReplicaSpecs[Worker].replicas"
    message: str  # what is wrong, e.g. "must be >= 0, got -1"
    fix: str = ""  # what to change, e.g. "set replicas to 0 or more"

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        return f"{text}; fix: {self.fix}" if self.fix else text


class InvalidJob(ValueError):
    """A TFJob that cannot be run, with every problem found in it."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = list(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.errors)
        head = f"{self.source}: invalid TFJob ({count} error{'s' if count != 1 else ''}):"
        return "\n".join([head, *(f"  - {error}" for error in self.errors)])
