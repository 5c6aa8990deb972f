"""Every error tfjob raises on purpose belongs to one tree, of one of two kinds, so
the operator's worker loop (and the CLI) can decide retry or give-up by kind."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import tfjob
from tfjob.api.errors import InvalidJob, PermanentError, TemporaryError, TfjobError


def _our_exceptions() -> list[type[BaseException]]:
    found = []
    for module in pkgutil.walk_packages(tfjob.__path__, "tfjob."):
        if module.name.startswith("tfjob.interfaces") or module.name.endswith("__main__"):
            continue  # the CLI's click exceptions translate these, for the terminal
        loaded = importlib.import_module(module.name)
        for _name, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.name:
                found.append(value)
    return found


def test_every_error_is_temporary_or_permanent() -> None:
    errors = _our_exceptions()
    assert len(errors) >= 10
    kinds = (TemporaryError, PermanentError)
    stray = [
        e.__qualname__ for e in errors if not issubclass(e, kinds) and e not in (TfjobError, *kinds)
    ]
    assert stray == []


def test_a_temporary_error_says_when_to_try_again() -> None:
    assert TemporaryError("busy").delay is None  # the caller's own backoff
    assert TemporaryError("busy", delay=2.5).delay == 2.5


def test_an_invalid_job_is_permanent_and_still_a_value_error() -> None:
    error = InvalidJob("job.yaml", [])
    assert isinstance(error, PermanentError) and isinstance(error, ValueError)
