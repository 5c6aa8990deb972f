"""Write-behind of TFJob statuses: creates and deletes go first, status follows.

Why: on a small cluster the API server is CPU-bound during a burst of new jobs, and
each job's status PUT (the `Created` condition and `startTime`) costs it about as much
as one of the job's creates. Pods are the job; the status only describes it. So a
status the core decided is handed here instead of being PUT inline, and is written
- at once when no create or delete is in flight (and none ended within HOLDOFF: the
  rule of activity.py, shared with the Events), so a status change that comes without
  creates - a pod started, a job finished - is written as promptly as before;
- otherwise when it is due, so a status never starves behind a stream of creates:
  MAX_DELAY (1 s) after it was decided if it reports what pods did (Running,
  Succeeded, ...), or START_DELAY (5 s, as long as Events may wait) if it came with
  creates of the job's own - it announces work (`Created`, `startTime`) whose pods and
  services are what a burst of new jobs is waiting for;
- coalesced: a job decided again before its status went out has only its latest
  status written (one PUT instead of two);
- with today's conflict rule: PUT at the cached resourceVersion, and on 409 retried
  only if the server's status is still the one decided from (`base`); on a real
  conflict the status is dropped and the job reconciled again from fresh data.

Correctness rests on three rules the reconciler follows:
- it decides from `decided_from(key, cached)`: the cached job with its unwritten
  status laid over it, so a second reconcile never re-stamps `startTime` or
  conditions from the stale cache;
- it waits for `settled(key)` before reading the cache, so it never decides while
  that job's status is on the wire (after the write the cache holds it);
- `write` (synchronous) is used when the status must be stored before the actions
  (`status_first`: a restart count read from a pod about to be deleted), or before
  the job is deleted; it supersedes the job's pending status.
Callbacks given with a status (metrics) run once, when it is stored; a dropped status
drops them, as a failed inline write did.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from tfjob.api import constants as c
from tfjob.api.errors import TemporaryError
from tfjob.api.types import JobStatus, ObjectMeta, TFJob
from tfjob.runtimes.kubernetes.activity import ReconcileWrites, now
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.decode import CachedJob, decode_tfjob
from tfjob.runtimes.kubernetes.informer import Informer
from tfjob.runtimes.kubernetes.resources import TFJOBS

log = structlog.get_logger("tfjob.status")

STATUS_ATTEMPTS = 3
MAX_DELAY = 1.0  # seconds a decided status may wait behind creates and deletes
START_DELAY = 5.0  # the same, for a status decided together with creates of its job
PARALLELISM = 16  # status PUTs in flight at once

Stored = Callable[[], None]
Retry = Callable[[str, Exception], None]  # the worker loop's: reconcile key again


class StatusConflict(TemporaryError):
    """Someone else changed the job's status since we read it: decide again."""


@dataclass
class _UnwrittenStatus:
    """A job's decided, not yet written status."""

    uid: str
    base: JobStatus  # the status on the server when it was decided
    status: JobStatus  # the latest decided status
    due: float  # the earliest time one of its decisions must be written by
    stored: list[Stored] = field(default_factory=list)


class StatusWriter:
    """Pending statuses per job key, and the task that writes them.

    It never touches the work queue: a status it could not write is handed to
    `retry` (the operator's worker loop), which decides when to reconcile again."""

    def __init__(
        self,
        client: KubeClient,
        jobs: Informer[CachedJob],
        retry: Retry,
        *,
        max_delay: float = MAX_DELAY,
        start_delay: float = START_DELAY,
        writes: ReconcileWrites | None = None,
        parallelism: int = PARALLELISM,
    ) -> None:
        self._client = client
        self._jobs = jobs
        self._retry = retry
        self._max_delay = max_delay
        self._start_delay = start_delay
        self._slots = asyncio.Semaphore(parallelism)
        self._pending: dict[str, _UnwrittenStatus] = {}  # insertion order: oldest first
        self._due: list[tuple[float, int, str]] = []  # heap; stale items skipped
        self._seq = itertools.count()
        self._writing: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Event()
        # The creates and deletes statuses yield to (shared with the event recorder).
        self.writes = writes or ReconcileWrites()
        self.writes.listen(self._changed)
        self._flushing = False

    # -- what the reconciler decides from -----------------------------------------------

    def decided_from(self, key: str, cached: TFJob) -> TFJob:
        """`cached` with its unwritten status laid over it.

        The overlay holds only while the server's status is still the one it was
        decided from; if someone else changed it, the pending status is stale and is
        dropped (the inline write would have met a conflict)."""
        pending = self._pending.get(key)
        if pending is None:
            return cached
        if pending.uid != cached.metadata.uid or pending.base != cached.status:
            del self._pending[key]
            return cached
        return msgspec.structs.replace(cached, status=pending.status)

    async def settled(self, key: str) -> None:
        """Wait until no status write of `key` is on the wire."""
        while (done := self._writing.get(key)) is not None:
            await done.wait()

    def pending(self, key: str) -> JobStatus | None:
        """The decided status of `key` not yet written, if any."""
        entry = self._pending.get(key)
        return entry.status if entry is not None else None

    def __len__(self) -> int:
        return len(self._pending)

    # -- handing statuses over ------------------------------------------------------------

    def defer(
        self, cached: TFJob, status: JobStatus, stored: Stored, *, with_creates: bool = False
    ) -> None:
        """Write `status` behind the creates and deletes; `stored` runs once it is.

        `with_creates`: the plan that decided it also creates pods or services of the
        job, so it may wait longer (START_DELAY) behind them."""
        key = _key(cached.metadata)
        due = now() + (self._start_delay if with_creates else self._max_delay)
        entry = self._pending.get(key)
        if entry is None:
            entry = self._pending[key] = _UnwrittenStatus(
                uid=cached.metadata.uid, base=cached.status, status=status, due=due
            )
        entry.status = status
        entry.stored.append(stored)
        entry.due = min(entry.due, due)
        heapq.heappush(self._due, (entry.due, next(self._seq), key))
        self._changed.set()

    async def write(
        self, cached: CachedJob, status: JobStatus, stored: Stored | None = None
    ) -> None:
        """PUT `status` now, superseding the job's pending status (whose callbacks run
        too: `status` was decided from it). Raises StatusConflict or the API error."""
        meta = cached.metadata
        entry = self._pending.pop(_key(meta), None)
        callbacks = [*(entry.stored if entry else []), *([stored] if stored else [])]
        if await self._put(meta, cached.status, status):
            _run(callbacks)

    async def write_pending(self, key: str) -> None:
        """Store `key`'s pending status now (before the job is deleted)."""
        cached = self._jobs.get(key)
        entry = self._pending.get(key)
        if entry is not None and isinstance(cached, TFJob):
            await self.write(cached, entry.status)

    def discard(self, key: str) -> None:
        """The job is gone: its pending status has nothing left to be written to."""
        self._pending.pop(key, None)

    # -- the background task ------------------------------------------------------------

    async def run(self) -> None:
        """Write pending statuses as they become due; runs until cancelled."""
        writes: set[asyncio.Task[None]] = set()
        try:
            while True:
                await self._slots.acquire()
                key = await self._next_due()
                # Marked as being written in the same step it leaves `_pending`, so a
                # reconcile never sees it in neither (and decides from a stale cache).
                entry = self._pending.pop(key)
                done = self._writing[key] = asyncio.Event()
                task = asyncio.create_task(self._write_due(key, entry, done))
                writes.add(task)
                task.add_done_callback(writes.discard)
        finally:
            for task in writes:
                task.cancel()

    async def flush(self, seconds: float) -> None:
        """Write every pending status now and wait for them (bounded), e.g. at shutdown."""
        self._flushing = True
        self._changed.set()
        try:
            await asyncio.wait_for(self._drained(), seconds)
        except TimeoutError:
            log.warning("statuses not written at shutdown", pending=len(self._pending))

    async def _drained(self) -> None:
        while self._pending or self._writing:
            for done in list(self._writing.values()):
                await done.wait()
            await asyncio.sleep(0.005)  # the writer task picks up what is left

    async def _next_due(self) -> str:
        """The oldest pending key once it may be written (see the module docstring)."""
        while True:
            self._changed.clear()
            key, wait = self._oldest()
            if key is not None and wait <= 0:
                return key
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait if key is not None else None)

    def _oldest(self) -> tuple[str | None, float]:
        """The pending key to write next (not one on the wire), and the seconds until
        it may be: when quiet, the oldest decided; while busy, the earliest due."""
        due = self._earliest_due()
        if due is None:
            return None, 0.0
        if self._flushing:
            return due[1], 0.0
        wait = self.writes.wait(due[0])
        if self.writes.busy:
            return due[1], wait
        return next(k for k in self._pending if k not in self._writing), wait

    def _earliest_due(self) -> tuple[float, str] | None:
        """Earliest (due, key) not on the wire; drops stale heap items on the way
        (a key on the wire is pushed again when its write ends, if still pending)."""
        while self._due:
            due, _seq, key = self._due[0]
            entry = self._pending.get(key)
            if entry is not None and entry.due == due and key not in self._writing:
                return due, key
            heapq.heappop(self._due)
        return None

    async def _write_due(self, key: str, entry: _UnwrittenStatus, done: asyncio.Event) -> None:
        try:
            await self._store(key, entry)
        finally:
            del self._writing[key]
            done.set()
            self._slots.release()
            again = self._pending.get(key)
            if again is not None:  # decided again while on the wire: look again
                heapq.heappush(self._due, (again.due, next(self._seq), key))
                self._changed.set()

    async def _store(self, key: str, entry: _UnwrittenStatus) -> None:
        """Write one deferred status with the conflict rule; on failure reconcile again."""
        cached = self._jobs.get(key)
        if not isinstance(cached, TFJob) or cached.metadata.uid != entry.uid:
            return  # deleted (maybe re-created) meanwhile, or undecodable: rejected anew
        try:
            if cached.status != entry.base:
                raise StatusConflict(f"status of {key} changed meanwhile")
            if await self._put(cached.metadata, entry.base, entry.status):
                _run(entry.stored)
        except StatusConflict as error:
            log.info("status dropped, reconciling again", job=key, reason=str(error))
            # Decide again at once: the cache already holds the other writer's status.
            self._retry(key, TemporaryError(f"status dropped: {error}", delay=0.0))
        except (ApiError, TransportError) as error:
            if isinstance(error, ApiError) and error.not_found:
                return
            log.warning("cannot write status, will retry", job=key, error=str(error))
            self._retry(key, error)

    # -- one PUT ------------------------------------------------------------------------

    async def _put(self, meta: ObjectMeta, base: JobStatus, status: JobStatus) -> bool:
        """PUT /status at `meta`'s version; on conflict, retry only if the server's status
        is still `base` (a spec or metadata change moved the version). False: the job
        is gone (404)."""
        body: dict[str, Any] = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "resourceVersion": meta.resource_version,
            },
            "status": msgspec.to_builtins(status),
        }
        for _attempt in range(STATUS_ATTEMPTS):
            try:
                raw = await self._client.replace_status(TFJOBS, meta.namespace, meta.name, body)
            except ApiError as error:
                if error.not_found:
                    return False  # deleted meanwhile: nothing left to record on
                if not error.conflict:
                    raise
                body["metadata"]["resourceVersion"] = await self._fresh_version(meta, base)
                continue
            self._jobs.write_through(decode_tfjob(raw))
            return True
        raise StatusConflict(f"status of {meta.namespace}/{meta.name} kept changing")

    async def _fresh_version(self, meta: ObjectMeta, base: JobStatus) -> str:
        fresh = decode_tfjob(await self._client.get(TFJOBS, meta.namespace, meta.name))
        self._jobs.write_through(fresh)
        if fresh.metadata.uid != meta.uid or fresh.status != base:
            raise StatusConflict(f"status of {meta.namespace}/{meta.name} changed meanwhile")
        return fresh.metadata.resource_version


def _key(meta: ObjectMeta) -> str:
    return f"{meta.namespace}/{meta.name}"


def _run(callbacks: list[Stored]) -> None:
    """Run the callbacks of a stored status; a failing one is a bug to log, not to raise."""
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("status callback failed")
