"""Expectations: the creates and deletes a job is still waiting to see in the cache.

Why: the operator decides from an informer cache that lags behind its own writes.
Right after creating `j-worker-3`, a reconcile that does not yet see it would create
it again; right after deleting a failed pod, it would count (and restart) it again.
So every create and delete is recorded here first, and a job is not reconciled until
the watch has shown all of them (or five minutes have passed, in case an event was
lost). This is what guarantees no duplicate pod and no double-counted restart.

Differences from upstream, on purpose:
- Pending operations are tracked by object name, not by counters (like client-go's
  UIDTrackingControllerExpectations): seeing the same deletion twice (once as a
  deletionTimestamp, once as the DELETED event) lowers it once, never twice.
- A job is reconciled only when all its expectations are met (tf-operator's AND),
  not when any one is (training-operator's OR, which lets one type's lag through).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["pods", "services"]
TIMEOUT_SECONDS = 300.0


@dataclass
class _Outstanding:
    """One job's creates and deletes sent but not yet seen in the watch."""

    creates: dict[Kind, set[str]] = field(
        default_factory=lambda: {"pods": set(), "services": set()}
    )
    deletes: dict[Kind, set[str]] = field(
        default_factory=lambda: {"pods": set(), "services": set()}
    )
    since: float = 0.0  # when the oldest still-pending operation was recorded

    def empty(self) -> bool:
        return not any(self.creates.values()) and not any(self.deletes.values())


class Expectations:
    """Pending operations per job key (`namespace/name`)."""

    def __init__(
        self,
        timeout: float = TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timeout = timeout
        self._clock = clock
        self._jobs: dict[str, _Outstanding] = {}

    # -- raising: before each write ---------------------------------------------------

    def expect_create(self, job: str, kind: Kind, name: str) -> None:
        self._pending(job).creates[kind].add(name)

    def expect_delete(self, job: str, kind: Kind, name: str) -> None:
        self._pending(job).deletes[kind].add(name)

    # -- lowering: watch events, failed or redundant writes ------------------------------

    def created(self, job: str, kind: Kind, name: str) -> None:
        """The cache saw `name` (or the create failed, or it already existed)."""
        pending = self._jobs.get(job)
        if pending is not None:
            pending.creates[kind].discard(name)
            self._drop_if_empty(job, pending)

    def deleted(self, job: str, kind: Kind, name: str) -> None:
        """The cache saw `name` go (or start terminating), or the delete failed."""
        pending = self._jobs.get(job)
        if pending is not None:
            pending.deletes[kind].discard(name)
            self._drop_if_empty(job, pending)

    # -- reading ------------------------------------------------------------------------

    def satisfied(self, job: str) -> bool:
        """Whether `job` may be reconciled: nothing pending, or pending for too long."""
        pending = self._jobs.get(job)
        if pending is None:
            return True
        if self._clock() - pending.since >= self._timeout:
            del self._jobs[job]  # an event was lost; trust the cache again
            return True
        return False

    def time_left(self, job: str) -> float:
        """Seconds until `job`'s expectations expire (0 if already satisfied)."""
        pending = self._jobs.get(job)
        if pending is None:
            return 0.0
        return max(self._timeout - (self._clock() - pending.since), 0.0)

    def pending(self, job: str) -> int:
        """How many operations of `job` are still unobserved."""
        state = self._jobs.get(job)
        if state is None:
            return 0
        return sum(map(len, state.creates.values())) + sum(map(len, state.deletes.values()))

    def forget(self, job: str) -> None:
        """The job is gone: drop whatever it was waiting for."""
        self._jobs.pop(job, None)

    # -- internals ------------------------------------------------------------------------

    def _pending(self, job: str) -> _Outstanding:
        pending = self._jobs.get(job)
        if pending is None:
            pending = self._jobs[job] = _Outstanding(since=self._clock())
        return pending

    def _drop_if_empty(self, job: str, pending: _Outstanding) -> None:
        if pending.empty():
            del self._jobs[job]
