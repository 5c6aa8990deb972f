"""An informer: a local cache of one resource, kept current by list-then-watch.

One asyncio task per resource (lightkube has no informer; the official client's is
thread-based):
- it lists in pages, asking for the next page as soon as a page's first bytes name it
  (the first list fills the cache page by page), then watches from the list's
  resourceVersion with bookmarks on, so a quiet watch still advances;
- every list is a consistent one (no resourceVersion): client-go's "0" would be served
  in one answer whatever the limit;
- a codec may read list pages in another encoding (`Codec.list_accept`: pods come as
  protobuf); watch events are always JSON; `metadata_only` lists and watches
  PartialObjectMetadata (services: the operator reads only their metadata);
- a dropped connection resumes the watch from the last resourceVersion seen, after an
  exponential backoff with jitter; 410 Gone relists and reports the differences
  between the old cache and the new list as adds, updates and deletes;
- `resource_version` is the last revision the cache is known to hold: what
  consistency.py compares our own writes with;
- an update that does not change an object's resourceVersion (a relist) is no change
  and calls no handler;
- indexers answer "the pods of job ns/name" without scanning the cache.
Why the page size and the pages' encodings: docs/decisions/.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

import msgspec
import structlog

from tfjob.runtimes.kubernetes.cache.backoff import Backoff
from tfjob.runtimes.kubernetes.transport.client import (
    METADATA,
    METADATA_LIST,
    ApiError,
    KubeClient,
    TransportError,
)
from tfjob.runtimes.kubernetes.transport.decode import (
    Codec,
    T,
    decode_event,
    decode_status,
    resource_version_of,
)
from tfjob.runtimes.kubernetes.transport.resources import Resource

log = structlog.get_logger("tfjob.informer")

RECONNECT_FIRST = 0.8  # seconds before the first re-list or re-watch, doubling...
RECONNECT_CAP = 30.0  # ...up to this, each stretched by up to 100% (jitter)
PAGE_SIZE = 2000  # objects per list page: docs/decisions/0007-list-pages-of-2000.md

IndexFunc = Callable[[T], "str | None"]


@dataclass
class Handlers(Generic[T]):
    """What to do when the cache changes (called on the event loop; must not block)."""

    on_add: Callable[[T], None] = lambda _obj: None
    on_update: Callable[[T, T], None] = lambda _old, _new: None
    on_delete: Callable[[T], None] = lambda _obj: None


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def key_of(obj: T) -> str:
    """The object's cache key, interned: the store, its indexes, the queue and the
    holds keep one str per object, not one per event that named it."""
    return sys.intern(object_key(obj.metadata.namespace, obj.metadata.name))


def is_newer(candidate: str, current: str) -> bool:
    """Whether resourceVersion `candidate` is later than `current`.

    resourceVersions are opaque by contract, but every etcd3-backed API server uses
    etcd's integer revision; anything else is treated as newer (trust the latest).
    """
    if candidate.isdigit() and current.isdigit():
        return int(candidate) > int(current)
    return candidate != current


class Informer(Generic[T]):
    """The cache of one resource (optionally one namespace and a label selector)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        codec: Codec[T],
        *,
        namespace: str | None = None,
        label_selector: str = "",
        page_size: int = PAGE_SIZE,
        backoff: Backoff | None = None,
        watch_seconds: int = 300,
        metadata_only: bool = False,
    ) -> None:
        self._client = client
        self._resource = resource
        self._codec = codec
        self._namespace = namespace
        self._selector = label_selector
        self._page_size = page_size
        self._backoff = backoff or Backoff(RECONNECT_FIRST, RECONNECT_CAP, jitter=1.0)
        self._watch_seconds = watch_seconds
        self._metadata_only = metadata_only
        self._store: dict[str, T] = {}
        self._indexers: dict[str, IndexFunc[T]] = {}
        # index name -> value -> the keys with that value: one key as itself, more as a
        # set (most values, a job's or TrainJob's, name one object: an empty set is
        # 216 bytes, a set of one as much).
        self._indices: dict[str, dict[str, str | set[str]]] = {}
        self._handlers: list[Handlers[T]] = []
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0  # how many times a 410 forced a fresh list

    @property
    def resource(self) -> Resource:
        return self._resource

    # -- configuration ---------------------------------------------------------------

    def add_index(self, name: str, func: IndexFunc[T]) -> None:
        """Index the cache by `func(obj)` (None: not indexed). Call before `run`."""
        self._indexers[name] = func
        self._indices[name] = {}

    def add_handlers(self, handlers: Handlers[T]) -> None:
        self._handlers.append(handlers)

    # -- reading the cache -----------------------------------------------------------

    def get(self, key: str) -> T | None:
        return self._store.get(key)

    def by_index(self, name: str, value: str) -> list[T]:
        keys = self._indices[name].get(value)
        if keys is None:
            return []
        if isinstance(keys, str):
            return [self._store[keys]]
        return [self._store[k] for k in keys]

    def items(self) -> list[T]:
        return list(self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    # -- running ---------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch forever; returns only when cancelled.

        Run again after a cancellation, it resumes the watch from the last
        resourceVersion it saw (a relist only if the server says that is too old).
        """
        relist = not self.resource_version
        while True:
            try:
                if relist:
                    await self._list()
                    relist = False
                await self._watch()
            except ApiError as error:
                if error.gone:
                    log.info("watch expired, relisting", resource=str(self._resource))
                    self.relists += 1
                    relist = True
                    continue
                await self._pause("api error", error)
            except (TransportError, msgspec.DecodeError) as error:
                await self._pause("connection error", error)

    async def _pause(self, what: str, error: Exception) -> None:
        delay = self._backoff.delay()
        log.warning(
            f"informer {what}, retrying",
            resource=str(self._resource),
            error=str(error) or type(error).__name__,
            retry_in=round(delay, 2),
        )
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        """List every page into the cache, then mark it synced.

        The first list (an empty cache) puts each page in as it is decoded, while the
        API server produces the next one: nobody reads the cache before it is synced,
        and the last page leaves nothing else to do. A relist collects every page
        first and swaps the cache in one step, reporting the differences."""
        first = not self._store
        items: list[T] = []
        version = ""
        started = time.perf_counter()
        decoding = 0.0
        pages = 0
        objects = 0
        listing = self._client.list_pages(
            self._resource,
            self._namespace,
            label_selector=self._selector,
            limit=self._page_size,
            accept=METADATA_LIST if self._metadata_only else self._codec.list_accept,
            # Metadata-only pages are cheaper uncompressed for both sides; full objects
            # are not (docs/decisions/0009-services-metadata-only-uncompressed.md).
            compressed=not self._metadata_only,
        )
        async with contextlib.aclosing(listing):
            async for body in listing:
                decode_started = time.perf_counter()
                page, page_version, _token = self._codec.decode_list(body)
                decoding += time.perf_counter() - decode_started
                del body
                pages += 1
                objects += len(page)
                version = version or page_version
                if first:
                    for obj in page:
                        self._upsert(obj)
                else:
                    items.extend(page)
        if not first:
            self._replace(items)
        self.resource_version = version
        self._backoff.reset()
        self.synced.set()
        log.info(  # start-up's cost per resource (bench/scale_bench.py reads it)
            "listed",
            resource=str(self._resource),
            objects=objects,
            pages=pages,
            seconds=round(time.perf_counter() - started, 3),
            decode_seconds=round(decoding, 3),
        )

    async def _watch(self) -> None:
        # Between one and two times the minimum, to spread reconnects (as client-go).
        timeout = int(self._watch_seconds * (1 + random.random()))
        events = self._client.watch(
            self._resource,
            self._namespace,
            resource_version=self.resource_version,
            label_selector=self._selector,
            timeout_seconds=timeout,
            accept=METADATA if self._metadata_only else "",
        )
        async with contextlib.aclosing(events):
            async for line in events:
                self._handle(line)
                self._backoff.reset()

    def _handle(self, line: bytes) -> None:
        event = decode_event(line)
        raw = bytes(event.object)
        if event.type == "ERROR":
            status = decode_status(raw)
            raise ApiError(status.code, status.reason, status.message)
        version = resource_version_of(raw)
        if event.type != "BOOKMARK":
            self._apply(event.type, raw)
        if version:
            self.resource_version = version

    def _apply(self, kind: str, raw: bytes) -> None:
        try:
            obj = self._codec.decode_object(raw)
        except msgspec.ValidationError as error:
            log.error("cannot decode watch event", resource=str(self._resource), error=str(error))
            return
        if kind == "DELETED":
            self._remove(key_of(obj))
        else:
            self._upsert(obj)

    # -- cache updates ---------------------------------------------------------------

    def _replace(self, items: list[T]) -> None:
        """Make the cache equal to a fresh list, reporting the differences."""
        fresh = {key_of(obj): obj for obj in items}
        for key in [k for k in self._store if k not in fresh]:
            self._remove(key)
        for obj in fresh.values():
            self._upsert(obj)

    def _upsert(self, obj: T) -> None:
        key = key_of(obj)
        current = self._store.get(key)
        if current is not None and (
            current.metadata.resource_version == obj.metadata.resource_version
        ):
            return  # the same object again (a relist): no change
        self._put(key, obj, current)
        for handlers in self._handlers:
            if current is None:
                _safely(handlers.on_add, obj)
            else:
                _safely(handlers.on_update, current, obj)

    def _put(self, key: str, obj: T, current: T | None) -> None:
        if current is not None:
            self._unindex(key, current)
        self._store[key] = obj
        for name, func in self._indexers.items():
            value = func(obj)
            if value is None:
                continue
            index = self._indices[name]
            keys = index.get(value)
            if keys is None:
                index[value] = key
            elif isinstance(keys, str):
                if keys != key:
                    index[value] = {keys, key}
            else:
                keys.add(key)

    def _remove(self, key: str) -> None:
        current = self._store.pop(key, None)
        if current is None:
            return
        self._unindex(key, current)
        for handlers in self._handlers:
            _safely(handlers.on_delete, current)

    def _unindex(self, key: str, obj: T) -> None:
        for name, func in self._indexers.items():
            value = func(obj)
            if value is None:
                continue
            index = self._indices[name]
            keys = index.get(value)
            if keys is None:
                continue
            if isinstance(keys, str):
                if keys == key:
                    del index[value]
                continue
            keys.discard(key)
            if len(keys) == 1:
                (index[value],) = keys
            elif not keys:
                del index[value]


def _safely(handler: Callable[..., None], *args: object) -> None:
    """A failing handler is a bug to log, never a reason to stop watching."""
    try:
        handler(*args)
    except Exception:
        log.exception("informer handler failed")
