"""Kubernetes Events about TFJobs, recorded without flooding the API server.

Why a correlator: the core re-emits some events on every reconcile (upstream's
`ExitedWithCode` is one), and a job in a restart loop reconciles often. Like
client-go's EventCorrelator, in this order:
1. spam filter - per involved object, a token bucket (25 at once, then one per five
   minutes); events beyond it are dropped;
2. aggregation - more than 10 events of the same object, type and reason but
   different messages within 10 minutes collapse into one event whose message starts
   "(combined from similar events): ";
3. deduplication - an event identical to one already written only bumps that event's
   `count` and `lastTimestamp` (a PATCH) instead of creating a new object.

Recording never blocks a reconcile: events go into a bounded queue that one task
drains (when it is full, events are dropped, as client-go's broadcaster does). Events
are diagnostics, pods are the job: while reconciles are running the sender holds
events back (up to MAX_DELAY seconds each), so a burst of new jobs gets its pods
created first and the API server writes the Events once it has a moment. Timestamps
are those of the recording, not of the sending.
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

from tfjob.api import constants as c
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.resources import EVENTS

log = structlog.get_logger("tfjob.events")

SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
AGGREGATE_MAX = 10
AGGREGATE_WINDOW = 600.0
CACHE_SIZE = 4096
QUEUE_SIZE = 10000
MAX_DELAY = 5.0
COMBINED_PREFIX = "(combined from similar events): "


@dataclass(frozen=True)
class ObjectRef:
    """The involved object (always a TFJob here)."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    kind: str = c.KIND
    api_version: str = c.API_VERSION

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


@dataclass(frozen=True)
class Record:
    """One event as a caller reports it."""

    ref: ObjectRef
    type: str
    reason: str
    message: str
    at: float = 0.0  # when it happened (time.time()); 0: unknown


@dataclass(frozen=True)
class Create:
    """Write a new Event object."""

    record: Record
    key: tuple[str, ...]


@dataclass(frozen=True)
class Bump:
    """Bump the count of the Event already written for `key`."""

    record: Record
    key: tuple[str, ...]
    count: int


Decision = Create | Bump | None


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


class Correlator:
    """Pure bookkeeping of client-go's spam filter, aggregator and deduplicator."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
    ) -> None:
        self._clock = clock
        self._burst = burst
        self._refill = refill_seconds
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._written: OrderedDict[tuple[str, ...], int] = OrderedDict()  # key -> count

    def decide(self, record: Record) -> Decision:
        """What to send for `record`: a new Event, a count bump, or nothing."""
        if not self._take_token(_object_key(record.ref)):
            return None
        record, key = self._aggregate(record)
        count = self._written.get(key)
        if count is None:
            return Create(record, key)
        self._written[key] = count + 1
        self._written.move_to_end(key)
        return Bump(record, key, count + 1)

    def written(self, key: tuple[str, ...]) -> None:
        """The Event for `key` now exists (count 1)."""
        _remember(self._written, key, 1)

    def lost(self, key: tuple[str, ...]) -> None:
        """The Event for `key` is gone (expired): the next one creates it anew."""
        self._written.pop(key, None)

    def forget_object(self, uid: str) -> None:
        """The job was deleted: drop its state so the caches do not keep it."""
        for cache in (self._buckets, self._similar, self._written):
            for key in [k for k in cache if k[2] == uid]:
                del cache[key]

    def _take_token(self, key: tuple[str, ...]) -> bool:
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self._burst), updated=now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) / self._refill)
        bucket.updated = now
        allowed = bucket.tokens >= 1.0
        if allowed:
            bucket.tokens -= 1.0
        _remember(self._buckets, key, bucket)
        return allowed

    def _aggregate(self, record: Record) -> tuple[Record, tuple[str, ...]]:
        """The record to send and its dedup key: itself, or - past the threshold of
        similar messages - the combined event, keyed by object, type and reason only
        (so every further similar event bumps the one combined event)."""
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


def _object_key(ref: ObjectRef) -> tuple[str, str, str]:
    return (ref.namespace, ref.name, ref.uid)


def _remember(cache: OrderedDict[tuple[str, ...], Any], key: tuple[str, ...], value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


class EventRecorder:
    """Records events in the background; `record` returns at once."""

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str = c.CONTROLLER_NAME,
        correlator: Correlator | None = None,
        quiet: asyncio.Event | None = None,
    ) -> None:
        self._client = client
        self._quiet = quiet
        self._component = component
        self._instance = socket.gethostname()
        self._correlator = correlator or Correlator()
        self._queue: asyncio.Queue[Record] = asyncio.Queue(QUEUE_SIZE)
        self._names: dict[tuple[str, ...], str] = {}
        self.dropped = 0

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        log.debug("event", type=type_, reason=reason, message=message)
        try:
            self._queue.put_nowait(Record(ref, type_, reason, message, time.time()))
        except asyncio.QueueFull:
            self.dropped += 1

    def forget_object(self, uid: str) -> None:
        self._correlator.forget_object(uid)
        for key in [k for k in self._names if k[2] == uid]:
            del self._names[key]

    async def run(self) -> None:
        """Send queued events forever (until cancelled)."""
        while True:
            record = await self._queue.get()
            try:
                await self._when_quiet(record)
                await self._send(record)
            except Exception as error:  # events are best effort, never fatal
                log.warning("cannot record event", reason=record.reason, error=str(error))
            finally:
                self._queue.task_done()

    async def flush(self, seconds: float) -> None:
        """Wait (bounded) for queued events to be sent, e.g. at shutdown."""
        try:
            await asyncio.wait_for(self._queue.join(), seconds)
        except TimeoutError:
            log.warning("events not sent at shutdown", pending=self._queue.qsize())

    async def _when_quiet(self, record: Record) -> None:
        """Hold `record` back while reconciles run, but never past MAX_DELAY."""
        if self._quiet is None or self._quiet.is_set():
            return
        left = MAX_DELAY - (time.time() - record.at)
        if left > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), left)

    async def _send(self, record: Record) -> None:
        decision = self._correlator.decide(record)
        if isinstance(decision, Bump) and decision.key in self._names:
            if await self._bump(decision):
                return
            self._correlator.lost(decision.key)
        if decision is not None:
            await self._create(decision.record, decision.key)

    async def _create(self, record: Record, key: tuple[str, ...]) -> None:
        now = _stamp(record.at)
        name = f"{record.ref.name}.{time.time_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": record.ref.namespace},
            "involvedObject": record.ref.to_wire(),
            "reason": record.reason,
            "message": record.message,
            "type": record.type,
            "source": {"component": self._component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }
        await self._client.create(EVENTS, record.ref.namespace, body)
        self._correlator.written(key)
        _remember_name(self._names, key, name)

    async def _bump(self, decision: Bump) -> bool:
        name = self._names[decision.key]
        patch = {
            "count": decision.count,
            "lastTimestamp": _stamp(decision.record.at),
            "message": decision.record.message,
        }
        try:
            await self._client.merge_patch(EVENTS, decision.record.ref.namespace, name, patch)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return True


def _remember_name(names: dict[tuple[str, ...], str], key: tuple[str, ...], name: str) -> None:
    names[key] = name
    if len(names) > CACHE_SIZE:
        del names[next(iter(names))]


def _stamp(at: float) -> str:
    moment = datetime.fromtimestamp(at, UTC) if at else datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
