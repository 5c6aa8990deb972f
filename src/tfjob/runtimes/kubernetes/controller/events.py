"""Kubernetes Events about TFJobs: every one written, or folded into a counted one.

Why this shape: the core re-emits some events on every reconcile (upstream's
`ExitedWithCode` is one), and a job in a restart loop reconciles often, so events
must be folded rather than written one by one - but `kubectl describe tfjob` is how a
user learns what happened, so none may be lost. Folding is client-go's correlator
without its spam filter (which drops):
1. aggregation - more than 10 events of the same object, type and reason but
   different messages within 10 minutes collapse into one event whose message starts
   "(combined from similar events): ";
2. deduplication - an event identical to one already recorded adds to that event's
   `count` (and moves its `lastTimestamp`) instead of making a new object.
Folding happens when an event is recorded, not when it is sent: the recorder keeps
one pending entry per distinct event, and repeats recorded while it waits (or while
its write is on the wire) fold into that entry's count. So one POST (new event) or
one PATCH (count and lastTimestamp) carries any number of repeats, and what waits is
bounded by the number of distinct events, not by how often they repeat.

Delivery: SENDERS tasks write pending entries oldest first, never two writes of one
entry at once. Events yield to the reconciler's creates and deletes
(activity.py): an entry goes at once when none is in flight and
none ended within the last 20 ms, otherwise it waits - at most MAX_WAIT (5 s) after
it was queued, so a long stream of creates delays Events but never starves them. A
burst of new jobs is then its creates first and its Events right after, instead of
both at once on an API server that is CPU-bound either way. Waiting drops nothing:
the entry stays pending (and repeats still fold into it), and the shutdown flush
writes everything at once, waiting for no create. A write that fails for a reason
that may pass (no answer, 429, 5xx) is retried with backoff; a POST retried after it
went through meets AlreadyExists (each entry keeps its object name) and counts as
written. Only an answer that will not change (e.g. 403/404: the namespace is gone)
gives an event up, counted as
`tfjob_events_dropped_total{reason="rejected"}`. The one bound is MAX_PENDING distinct
events waiting (`reason="overflow"` if ever reached); events still pending when the
shutdown flush runs out of time are counted as `reason="shutdown"`.

Budget: the recorder is given its own client (`KubeClient.with_own_budget`), so with
a client-side QPS limit events and reconcile writes each have a bucket of that size
(twice the limit in all; Kubeflow's operator shares one bucket among all its
requests, Events included); event writes never starve pod creates.
Timestamps are those of the recording, not of the sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from tfjob.api.timestamps import rfc3339
from tfjob.runtimes.kubernetes.cache.backoff import Backoff
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites, now
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import EVENTS

log = structlog.get_logger("tfjob.events")

AGGREGATE_MAX = 10
AGGREGATE_WINDOW = 600.0
CACHE_SIZE = 4096  # distinct events remembered for deduplication (client-go's size)
MAX_PENDING = 100_000  # distinct events waiting to be written (never reached so far)
SENDERS = 4  # event writes in flight at once
MAX_WAIT = 5.0  # seconds a queued event may wait behind creates and deletes
RETRY_BASE = 0.1
RETRY_MAX = 5.0
FLUSH_RETRY = 0.2  # during a flush, a failed write is tried again this soon at most
COMBINED_PREFIX = "(combined from similar events): "

Key = tuple[str, ...]


@dataclass(frozen=True)
class ObjectRef:
    """The involved object (a job of some kind) and the controller reporting on it:
    upstream's recorder of each kind names that kind's controller as the source."""

    namespace: str
    name: str
    uid: str
    kind: str  # the job's kind and apiVersion: "PyTorchJob", "kubeflow.org/v1"
    api_version: str
    reporter: str  # source.component, the kind's controller: "pytorchjob-controller"
    resource_version: str = ""

    def to_wire(self) -> dict[str, str]:
        ref = {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        return ref


@dataclass(frozen=True, slots=True)
class Record:
    """One event as a caller reports it."""

    ref: ObjectRef
    type: str
    reason: str
    message: str
    at: float = 0.0  # when it happened (time.time()); 0: unknown


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


class Correlator:
    """Pure bookkeeping of client-go's aggregator: which event a record folds into."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._similar: OrderedDict[Key, _Similar] = OrderedDict()

    def correlate(self, record: Record) -> tuple[Record, Key]:
        """The record to write and its dedup key: itself, or - past the threshold of
        similar messages - the combined event, keyed by object, type and reason only
        (so every further similar event adds to the one combined event)."""
        now = self._clock()
        similar_key = (*_object_key(record.ref), record.type, record.reason)
        similar = self._similar.get(similar_key)
        if similar is None or now - similar.last > AGGREGATE_WINDOW:
            similar = _Similar()
        similar.messages.add(record.message)
        similar.last = now
        _remember(self._similar, similar_key, similar)
        if len(similar.messages) <= AGGREGATE_MAX:
            return record, (*similar_key, record.message)
        combined = Record(
            record.ref, record.type, record.reason, COMBINED_PREFIX + record.message, record.at
        )
        return combined, similar_key

    def forget_object(self, uid: str) -> None:
        """The job was deleted: drop its state so the cache does not keep it."""
        for key in [k for k in self._similar if k[2] == uid]:
            del self._similar[key]


def _object_key(ref: ObjectRef) -> tuple[str, str, str]:
    return (ref.namespace, ref.name, ref.uid)


def _remember(cache: OrderedDict[Key, Any], key: Key, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


@dataclass(slots=True)
class Entry:
    """One distinct event: what was recorded, and how much of it the server holds."""

    record: Record  # the latest occurrence (message and lastTimestamp)
    name: str  # the Event object's name, fixed so a retried POST is recognised
    first_at: float
    count: int = 0  # occurrences recorded
    stored: int = 0  # occurrences the server's object counts (0: not created yet)
    due: float = 0.0  # loop time by which it is written even while creates go on

    @property
    def behind(self) -> bool:
        return self.count > self.stored


class EventMetrics:
    """The recorder's counters (registered in the operator's registry)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry or CollectorRegistry()
        self.recorded = Counter("tfjob_events_recorded", "Events recorded", registry=r)
        self.writes = Counter(
            "tfjob_event_writes", "Event writes stored (create or count bump)", ["verb"], registry=r
        )
        self.retries = Counter("tfjob_event_write_retries", "Event writes retried", registry=r)
        self.dropped = Counter(
            "tfjob_events_dropped",
            "Events not written: overflow (MAX_PENDING), rejected by the API, or still "
            "pending when the shutdown flush ran out of time",
            ["reason"],
            registry=r,
        )
        self.pending = Gauge("tfjob_events_pending", "Distinct events waiting", registry=r)
        self.create = self.writes.labels(verb="create")
        self.patch = self.writes.labels(verb="patch")
        for reason in ("rejected", "overflow", "shutdown"):  # at 0 until one is dropped
            self.dropped.labels(reason=reason)


class EventRecorder:
    """Records events in the background; `record` returns at once and never drops."""

    def __init__(
        self,
        client: KubeClient,
        *,
        correlator: Correlator | None = None,
        registry: CollectorRegistry | None = None,
        senders: int = SENDERS,
        max_pending: int = MAX_PENDING,
        writes: ReconcileWrites | None = None,
        max_wait: float = MAX_WAIT,
    ) -> None:
        """`writes`: the reconciler's creates and deletes, which events yield to (at
        most `max_wait` seconds each); None: events never wait."""
        self._client = client
        self._instance = socket.gethostname()
        self._correlator = correlator or Correlator()
        self._senders = senders
        self._max_pending = max_pending
        self._known: OrderedDict[Key, Entry] = OrderedDict()  # for deduplication
        self._waiting: OrderedDict[int, Entry] = OrderedDict()  # id(entry): oldest first
        self._sending: set[int] = set()
        self._wake = asyncio.Event()
        self._writes = writes
        self._max_wait = max_wait
        self._flushing = False
        self._flush_started = asyncio.Event()  # ends writers' retry pauses (see _rest)
        if writes is not None:
            writes.listen(self._wake)  # the creates ended: waiting events look again
        self._drained = asyncio.Event()  # set while nothing is pending
        self._drained.set()
        self._stamp = 0  # the last name's nanoseconds (see _new_name)
        self.metrics = EventMetrics(registry)

    # -- recording --------------------------------------------------------------------

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        log.debug("event", type=type_, reason=reason, message=message)
        self.metrics.recorded.inc()
        record, key = self._correlator.correlate(Record(ref, type_, reason, message, time.time()))
        entry = self._known.get(key)
        if entry is None:
            name = self._new_name(ref.name)
            entry = Entry(record=record, name=name, first_at=record.at)
            _remember(self._known, key, entry)
        entry.record = record
        entry.count += 1
        self._enqueue(entry)

    def forget_object(self, uid: str) -> None:
        """The job is gone: stop deduplicating against its events (pending ones are
        still written - they say what happened to it)."""
        self._correlator.forget_object(uid)
        for key in [k for k in self._known if k[2] == uid]:
            del self._known[key]

    @property
    def pending(self) -> int:
        """Distinct events waiting for a write or on the wire."""
        return len(self._waiting) + len(self._sending)

    def _enqueue(self, entry: Entry) -> None:
        ident = id(entry)
        if ident in self._waiting or ident in self._sending:
            return  # folded: the write already queued (or, after it, the re-queue) carries it
        if len(self._waiting) >= self._max_pending:
            self.metrics.dropped.labels(reason="overflow").inc(entry.count - entry.stored)
            entry.stored = entry.count
            log.warning("event queue full, event dropped", reason=entry.record.reason)
            return
        if self._writes is not None:
            entry.due = now() + self._max_wait
        self._waiting[ident] = entry
        self._pending_changed()
        if len(self._waiting) == 1:  # was empty: senders wait for nothing until told
            self._wake.set()

    def _pending_changed(self) -> None:
        self.metrics.pending.set(self.pending)
        if self.pending:
            self._drained.clear()
        else:
            self._drained.set()

    # -- sending ------------------------------------------------------------------------

    async def run(self) -> None:
        """Write pending events forever (until cancelled), SENDERS at a time."""
        async with asyncio.TaskGroup() as group:
            for _ in range(self._senders):
                group.create_task(self._send_loop())

    async def flush(self, seconds: float) -> bool:
        """Write every recorded event now - waiting for no create - and wait (bounded)
        until they are, e.g. at shutdown. False, with the rest counted as dropped, if
        time ran out."""
        self._flushing = True
        self._wake.set()
        self._flush_started.set()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._drained.wait()
        finally:
            self._flushing = False
            self._flush_started.clear()
        if not self.pending:
            return True
        lost = sum(e.count - e.stored for e in self._waiting.values())
        self.metrics.dropped.labels(reason="shutdown").inc(lost)
        log.warning("events not sent at shutdown", pending=self.pending, occurrences=lost)
        return False

    async def _send_loop(self) -> None:
        backoff = Backoff(RETRY_BASE, RETRY_MAX)
        while True:
            entry = await self._next()
            ident = id(entry)
            self._sending.add(ident)
            pause = 0.0
            try:
                await self._write(entry)
                backoff.reset()
            except (ApiError, TransportError) as error:
                if isinstance(error, ApiError) and not _worth_retrying(error):
                    self._give_up(entry, error)
                else:
                    pause = backoff.delay()
                    self.metrics.retries.inc()
                    log.info("event write failed, will retry", error=str(error))
            except Exception as error:  # a bug must not stop the other events
                self._give_up(entry, error)
            finally:
                self._sending.discard(ident)
                if entry.behind:
                    self._enqueue(entry)  # repeats folded in while on the wire, or a retry
                self._pending_changed()
            if pause:
                await self._rest(pause)

    async def _rest(self, pause: float) -> None:
        """A writer's pause after a failed write: the backoff, but cut short when a
        flush starts and at most FLUSH_RETRY during one. Shutdown has a bounded time,
        and the failed entry waits in the queue again: with every writer sleeping up
        to RETRY_MAX, a flush could otherwise spend that long writing nothing."""
        if self._flushing:
            await asyncio.sleep(min(pause, FLUSH_RETRY))
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(pause):
                await self._flush_started.wait()

    async def _next(self) -> Entry:
        """The oldest waiting entry, once it may be written."""
        while True:
            self._wake.clear()
            wait = self._head_wait()
            if wait is not None and wait <= 0:
                _ident, entry = self._waiting.popitem(last=False)
                return entry
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    def _head_wait(self) -> float | None:
        """Seconds until the oldest entry may go (see activity.py); None: none waits.
        Oldest first is also earliest due: every entry waits the same bound."""
        if not self._waiting:
            return None
        if self._writes is None or self._flushing:
            return 0.0
        return self._writes.wait(next(iter(self._waiting.values())).due)

    def _give_up(self, entry: Entry, error: Exception) -> None:
        self.metrics.dropped.labels(reason="rejected").inc(entry.count - entry.stored)
        entry.stored = entry.count
        log.warning("event rejected", reason=entry.record.reason, error=repr(error))

    def _new_name(self, job: str) -> str:
        """`<job>.<nanoseconds, hex>`, as client-go names Events, but never the same
        name twice in this process: the stamp moves on by at least 1 ns. Two events
        recorded within the clock's resolution (or while it steps back) would otherwise
        share a name, and the second POST, meeting AlreadyExists, would be taken as
        written: an Event lost."""
        self._stamp = max(time.time_ns(), self._stamp + 1)
        return f"{job}.{self._stamp:x}"

    async def _write(self, entry: Entry) -> None:
        count = entry.count
        if entry.stored:
            try:
                await self._patch(entry, count)
            except ApiError as error:
                if not error.not_found:
                    raise
                entry.stored = 0  # expired (events live an hour): create it anew
                entry.name = self._new_name(entry.record.ref.name)
            else:
                entry.stored = count
                self.metrics.patch.inc()
                return
        try:
            await self._create(entry, count)
        except ApiError as error:
            if not error.already_exists:
                raise
            # An earlier POST of this entry went through without an answer we saw.
            await self._patch(entry, count)
        entry.stored = count
        self.metrics.create.inc()

    async def _create(self, entry: Entry, count: int) -> None:
        record = entry.record
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": entry.name, "namespace": record.ref.namespace},
            "involvedObject": record.ref.to_wire(),
            "reason": record.reason,
            "message": record.message,
            "type": record.type,
            "source": {"component": record.ref.reporter},
            "firstTimestamp": _stamp(entry.first_at),
            "lastTimestamp": _stamp(record.at),
            "count": count,
            "reportingComponent": record.ref.reporter,
            "reportingInstance": self._instance,
        }
        await self._client.create(EVENTS, record.ref.namespace, body)

    async def _patch(self, entry: Entry, count: int) -> None:
        patch = {
            "count": count,
            "lastTimestamp": _stamp(entry.record.at),
            "message": entry.record.message,
        }
        await self._client.merge_patch(EVENTS, entry.record.ref.namespace, entry.name, patch)


def _worth_retrying(error: ApiError) -> bool:
    """429, 5xx and 409 conflicts may pass; other 4xx answers will not change."""
    return error.code == 429 or error.code >= 500 or error.conflict


def _stamp(at: float) -> str:
    """Wall-clock seconds `at` (0: now) as an Event's timestamp."""
    return rfc3339(datetime.fromtimestamp(at, UTC) if at else datetime.now(UTC))
