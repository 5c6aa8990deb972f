"""A deduplicating, rate-limited, delaying work queue of job keys (client-go's design).

Why this shape:
- A controller is level-triggered: ten pod events for one job must cause one
  reconcile, not ten. A key waiting in the queue absorbs further adds ("dirty" set).
- Two workers must never reconcile the same job at once, or both would create the
  same pods. A key being processed is parked: adds while it is processing mark it
  dirty, and `done` puts it back in the queue exactly once ("processing" set).
- Failures retry with a per-key exponential delay (5 ms doubling up to 1000 s) so a
  broken job cannot spin a worker, and `forget` resets it after a success.
- Two lanes: changes to jobs already reconciled (a pod started, a deadline, a retry)
  go before jobs seen for the first time. A burst of N new jobs otherwise puts each
  job's second reconcile - the one that sees its pods Running and reports it - at the
  back of a FIFO behind every job not yet created, so reporting waited for the whole
  burst. A first reconcile is `add_new`; every other add is a reaction, and a reaction
  to a key already waiting as new moves it up. New jobs still get one turn in
  every NEW_SHARE+1 when both lanes wait, so a flood of reactions cannot starve them.
- The core asks to be woken at deadlines (activeDeadlineSeconds, TTL). `add_after`
  keeps those in a heap served by one timer task that sleeps until the earliest
  deadline: no polling, and a deadline fires within the loop's timer resolution.

Single event loop only: no locks are needed, because nothing here awaits while
its state is half-updated.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from tfjob.runtimes.kubernetes.cache.backoff import ExponentialBackoff


@dataclass
class QueueHooks:
    """Callbacks for metrics; the queue itself knows nothing about Prometheus.

    `on_latency` gets how long a key waited, `on_work` how long its processing took;
    `expose_in_flight` is handed, once, a function giving the age of every key being
    processed now (read when metrics are scraped: stuck workers show there).
    """

    on_add: Callable[[], None] = lambda: None
    on_depth: Callable[[int], None] = lambda _depth: None
    on_retry: Callable[[], None] = lambda: None
    on_latency: Callable[[float], None] = lambda _seconds: None
    on_work: Callable[[float], None] = lambda _seconds: None
    expose_in_flight: Callable[[Callable[[], list[float]]], None] = lambda _ages: None


NEW_SHARE = 8  # reactions served per new job while both lanes wait
REACTION, NEW = 0, 1  # lanes, in the order they are served


class WorkQueue:
    """Job keys waiting for a reconcile; see the module docstring for the rules."""

    def __init__(
        self,
        backoff: ExponentialBackoff | None = None,
        hooks: QueueHooks | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        # Each lane holds (seq, key); `_queued` says which entry is live, so moving a
        # key to the reaction lane leaves a stale entry behind that `get` skips.
        self._lanes: tuple[deque[tuple[int, str]], deque[tuple[int, str]]] = (
            deque(),
            deque(),
        )
        self._queued: dict[str, tuple[int, int]] = {}  # key -> (lane, seq)
        self._reactions_in_a_row = 0
        self._dirty: dict[str, int] = {}  # key -> the lane it goes back to
        self._processing: dict[str, float] = {}  # key -> when its processing started
        self._added_at: dict[str, float] = {}
        self._backoff = backoff or ExponentialBackoff()
        self._hooks = hooks or QueueHooks()
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._getters: deque[asyncio.Future[None]] = deque()
        # (ready at, seq, key): a tuple, 64 bytes, where a dataclass was 150.
        self._heap: list[tuple[float, int, str]] = []
        self._waiting: dict[str, float] = {}  # key -> earliest ready time in the heap
        self._seq = itertools.count()
        self._timer_wake = asyncio.Event()
        self._shutting_down = False
        self._hooks.expose_in_flight(self.in_flight)

    # -- adding ---------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Queue `key` now, as a reaction to a change of a job already reconciled.

        A no-op if it is already waiting as a reaction; if it waits as new, it moves up.
        """
        self._add(key, REACTION)

    def add_new(self, key: str) -> None:
        """Queue `key` for its first reconcile, behind every waiting reaction."""
        self._add(key, NEW)

    def _add(self, key: str, lane: int) -> None:
        if self._shutting_down:
            return
        waiting = self._dirty.get(key)
        if waiting is not None and waiting <= lane:
            return
        if waiting is None:
            self._hooks.on_add()
        self._dirty[key] = lane
        if key in self._processing:
            return  # `done` re-queues it
        self._push(key, lane)

    def add_after(self, key: str, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending time for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), key))
        if self._heap[0][2] == key and self._heap[0][0] == ready_at:
            self._timer_wake.set()  # the earliest deadline changed

    def add_rate_limited(self, key: str) -> None:
        """Retry `key` after its exponential backoff delay."""
        self._hooks.on_retry()
        self.add_after(key, self._backoff.when(key))

    def forget(self, key: str) -> None:
        """`key` succeeded: its next failure starts the backoff from the beginning."""
        self._backoff.forget(key)

    # -- taking -----------------------------------------------------------------------

    async def get(self) -> str | None:
        """The next key to process, or None once the queue is shut down.

        After shutdown no new work is handed out, even if keys are waiting: the
        operator is stopping and the next leader (or the next start) relists anyway.
        """
        while not self._queued and not self._shutting_down:
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._getters:
                    self._getters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass the wake-up on to another worker
                raise
        if self._shutting_down:
            return None
        key = self._pop()
        self._hooks.on_depth(len(self._queued))
        now = self._clock()
        self._processing[key] = now
        del self._dirty[key]
        added = self._added_at.pop(key, None)
        if added is not None:
            self._hooks.on_latency(now - added)
        return key

    def done(self, key: str) -> None:
        """Processing of `key` finished; re-queue it if it was added meanwhile."""
        started = self._processing.pop(key, None)
        if started is not None:
            self._hooks.on_work(self._clock() - started)
        lane = self._dirty.get(key)
        if lane is not None and not self._shutting_down:
            self._push(key, lane)

    # -- state --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._queued)

    def in_flight(self) -> list[float]:
        """Seconds each key being processed has been at it (client-go's unfinished work)."""
        if not self._processing:
            return []
        now = self._clock()
        return [now - started for started in self._processing.values()]

    def shut_down(self) -> None:
        """Stop handing out work; workers blocked in `get` return None."""
        self._shutting_down = True
        self._timer_wake.set()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- delayed adds -----------------------------------------------------------------

    async def run_timer(self) -> None:
        """Move delayed keys into the queue when they are due; runs until shutdown."""
        while not self._shutting_down:
            self._release_due()
            timeout = self._heap[0][0] - self._clock() if self._heap else None
            self._timer_wake.clear()
            if timeout is not None and timeout <= 0:
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._timer_wake.wait()

    def _release_due(self) -> None:
        now = self._clock()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _seq, key = heapq.heappop(self._heap)
            if self._waiting.get(key) != ready_at:
                continue  # superseded by an earlier deadline that already fired
            del self._waiting[key]
            self.add(key)

    # -- internals --------------------------------------------------------------------

    def _push(self, key: str, lane: int) -> None:
        seq = next(self._seq)
        self._queued[key] = (lane, seq)  # replaces (so voids) an entry in the new lane
        self._lanes[lane].append((seq, key))
        self._added_at.setdefault(key, self._clock())
        self._hooks.on_depth(len(self._queued))
        self._wake_one()

    def _pop(self) -> str:
        """The next live key: reactions first, but one new job per NEW_SHARE of them."""
        reactions, new = (self._drop_stale(lane) for lane in (REACTION, NEW))
        if reactions and not (new and self._reactions_in_a_row >= NEW_SHARE):
            self._reactions_in_a_row += new  # count only turns taken from waiting new jobs
            lane = REACTION
        else:
            self._reactions_in_a_row = 0
            lane = NEW
        _, key = self._lanes[lane].popleft()
        del self._queued[key]
        return key

    def _drop_stale(self, lane: int) -> bool:
        """Skip the lane's leading entries that were moved; True if a live one is left."""
        entries = self._lanes[lane]
        while entries:
            seq, key = entries[0]
            if self._queued.get(key) == (lane, seq):
                return True
            entries.popleft()
        return False

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
