"""Reconcile writes in flight: what the Event writes yield to.

On a small cluster the API server is CPU-bound during a burst of new jobs, and an
Event POST costs it about as much as a create; pods are the job, Events only describe
it. So the reconciler marks its creates and deletes with `acting()`, and the event
recorder asks `wait(due)` before each write: go at once when no create or delete is
in flight and none ended within HOLDOFF (the gaps between one reconcile's creates and
the next's do not let them slip in), otherwise wait - never past the write's own due
time, so a long stream of creates never starves them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

HOLDOFF = 0.02  # quiet this long after the last create/delete before writing


class ReconcileWrites:
    """Counts the creates and deletes in flight; wakes listeners when none are left."""

    def __init__(self, holdoff: float = HOLDOFF) -> None:
        self._holdoff = holdoff
        self._in_flight = 0
        self._quiet_since = 0.0
        self._listeners: list[asyncio.Event] = []

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Around creates and deletes: background writes wait (bounded) meanwhile."""
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._quiet_since = now()
                for listener in self._listeners:
                    listener.set()

    def listen(self, wake: asyncio.Event) -> None:
        """Set `wake` whenever the last write in flight ends (a waiter looks again)."""
        self._listeners.append(wake)

    def wait(self, due: float) -> float:
        """Seconds an Event write due at `due` (loop time) should still wait: <= 0
        to go now. While busy, until it is due (`wake` is set if the writes end
        sooner); when quiet, until HOLDOFF has passed since the last one, or it is due."""
        left = due - now()
        if self._in_flight:
            return left
        return min(left, self._quiet_since + self._holdoff - now())


def now() -> float:
    """The clock of due times: the event loop's (monotonic)."""
    return asyncio.get_running_loop().time()
