"""tfjob's one exception tree, and the errors about bad input.

Every error tfjob raises on purpose is a `TfjobError` of one of two kinds, so whoever
catches it (the operator's worker loop, the CLI) decides by kind, not by name:
- `TemporaryError`: trying again may succeed (the API server did not answer, a write
  met someone else's); `delay` says when, or None for the caller's own backoff;
- `PermanentError`: trying again would fail the same way (a spec that cannot run, a
  cluster without the TFJob API); the text says what to change.
Bad input names the field, what is wrong, and how to fix it (`FieldError`).
"""

from __future__ import annotations

from typing import Any

import msgspec


class TfjobError(Exception):
    """The root of every error tfjob raises on purpose."""


class TemporaryError(TfjobError):
    """Trying again may succeed; `delay` (seconds) says when, None: with backoff."""

    def __init__(self, *args: Any, delay: float | None = None) -> None:
        super().__init__(*args)
        self.delay = delay


class PermanentError(TfjobError):
    """Trying again would fail the same way: give up and say why."""


class FieldError(msgspec.Struct, frozen=True):
    """One problem with one field of a TFJob."""

    path: str  # e.g. "spec.tfReplicaSpecs[Worker].replicas"
    message: str  # what is wrong, e.g. "must be >= 0, got -1"
    fix: str = ""  # what to change, e.g. "set replicas to 0 or more"

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}"
        return f"{text}; fix: {self.fix}" if self.fix else text


class InvalidJob(PermanentError, ValueError):
    """A job (a TFJob unless `kind` says) that cannot be run, with every problem."""

    def __init__(self, source: str, errors: list[FieldError], *, kind: str = "TFJob") -> None:
        self.source = source
        self.errors = list(errors)
        self.kind = kind
        super().__init__(self._render())

    def _render(self) -> str:
        count = len(self.errors)
        head = f"{self.source}: invalid {self.kind} ({count} error{'s' if count != 1 else ''}):"
        return "\n".join([head, *(f"  - {error}" for error in self.errors)])
