"""A thin async Kubernetes client of ours: raw JSON in, raw JSON out.

Not a generated client's models (lightkube's, kubernetes_asyncio's): decoding every
response into them on the hot path (lists and watch events of thousands of pods) is
far slower and bigger than decoding straight into our projections, and lightkube's
watch cannot ask for bookmarks (docs/decisions/0001-msgspec-projections.md). aiohttp
rather than httpx, because its client CPU per request is a fraction of httpx's, and on
a small machine the operator's CPU is taken from the API server's
(docs/decisions/0003-aiohttp-over-httpx.md), and now an HTTP/1.1 client of our own
rather than aiohttp (http1.py), at half aiohttp's CPU per request and without its 9 MB
of modules (docs/decisions/0037-own-http-client.md). Credentials are read by a loader
of ours (kubeconfig.py, kept current by credentials.py); this module sends the few
requests the operator needs and hands back bytes. Each request carries the
credentials' current header and TLS context, so a refreshed client certificate is
presented on the connections opened after the refresh (the pool keeps connections
per context).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import msgspec

from tfjob import __version__
from tfjob.api.errors import TemporaryError
from tfjob.runtimes.kubernetes.transport.credentials import Connection, Credentials, connection
from tfjob.runtimes.kubernetes.transport.decode import continue_token, decode_status
from tfjob.runtimes.kubernetes.transport.http1 import HttpError, Origin, Pool, Response
from tfjob.runtimes.kubernetes.transport.resources import Resource

USER_AGENT = f"tfjob-operator/{__version__}"
REQUEST_TIMEOUT = 30.0
WATCH_SILENCE = 60.0  # seconds past a watch's server-side timeout without a byte: it is gone
POOL_SIZE = 64  # connections kept open (a burst of creates reuses them all)
# Sent with every request (a request's own Accept or Accept-Encoding replaces them).
HEADERS = {"User-Agent": USER_AGENT, "Accept": "application/json", "Accept-Encoding": "gzip"}
_encode = msgspec.json.encode
BATCH = 0.25  # seconds of tokens a throttled queue is handed at once (TokenBucket)
REFUSED = (400, 422)  # answers that will not change for the same request (ApiError.refused)
# Only the objects' metadata (PartialObjectMetadata): a list, and a watch's objects.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


class TransportError(TemporaryError):
    """The request did not get an answer (connection refused, reset, timed out)."""


class RequestTimeout(TransportError):
    """No answer in time; the request may or may not have been carried out."""


class ApiError(TemporaryError):
    """A non-2xx answer from the API server, with its metav1.Status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def refused(self) -> bool:
        """The request itself is refused (400 BadRequest, 422 Invalid): sending it
        again, unchanged, gets the same answer; the object has to change first.

        Not 403: an exceeded ResourceQuota is a 403 that clears by itself when other
        pods finish, as does RBAC once an administrator grants it, and nothing about
        the job would change to queue it again. Not 404: on a create it means the
        namespace is going, and the job goes with it (its reconciles end there)."""
        return self.code in REFUSED

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        """A stale resourceVersion (optimistic concurrency), not AlreadyExists."""
        return self.code == 409 and self.reason != "AlreadyExists"

    @property
    def gone(self) -> bool:
        """The resourceVersion is too old to watch from: relist."""
        return self.code == 410 or self.reason in ("Expired", "Gone")


class TokenBucket:
    """Client-side request throttle (upstream's --kube-api-qps/--kube-api-burst).

    Off by default: the API server's Priority and Fairness already protects it, and a
    client-side limit caps how fast a big job's pods can be created. It exists for
    clusters that want the old behaviour, and so tests can slow the operator down.

    Two queues: a waiter that asks `first` (a job's status PUT) gets the next token
    before every waiter that did not (creates, deletes, lists). With the 4 workers'
    creates queued, a status at 20 QPS would otherwise wait ~1.6 s of tokens behind
    them; the budget spent is the same, only the order changes. Within a queue, first
    come first served.

    Tokens for a queue of ordinary waiters are handed out BATCH seconds' worth at a
    time (5 at 20 QPS), never more than the burst allows: the rate and the burst are
    the same, but the process wakes a fifth as often, which at 20 QPS is a good part
    of the operator's CPU. A `first` waiter is served as soon as one token is there.
    """

    def __init__(self, qps: float, burst: int) -> None:
        self._rate = qps
        self._burst = max(burst, 1)
        self._tokens = float(self._burst)
        self._updated: float | None = None
        self._first: collections.deque[asyncio.Future[None]] = collections.deque()
        self._rest: collections.deque[asyncio.Future[None]] = collections.deque()
        self._dispenser: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # a `first` waiter arrived: stop saving up

    def twin(self) -> TokenBucket:
        """A fresh bucket with the same rate and burst (a budget of its own)."""
        return TokenBucket(self._rate, self._burst)

    async def take(self, *, first: bool = False) -> None:
        """Wait for a token; `first`: ahead of every waiter that is not."""
        loop = asyncio.get_running_loop()
        self._refill(loop.time())
        if self._tokens >= 1.0 and not self._first and not self._rest:
            self._tokens -= 1.0
            return
        waiter: asyncio.Future[None] = loop.create_future()
        (self._first if first else self._rest).append(waiter)
        if first:
            self._wake.set()
        if self._dispenser is None or self._dispenser.done():
            self._dispenser = loop.create_task(self._dispense())
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._tokens += 1.0  # handed a token it will not use: give it back
            raise

    async def _dispense(self) -> None:
        """Hand out tokens as they come, the `first` queue before the other."""
        loop = asyncio.get_running_loop()
        while self._first or self._rest:
            self._refill(loop.time())
            want = 1.0 if self._first else min(len(self._rest), self._batch)
            if self._tokens < want:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout((want - self._tokens) / self._rate):
                        await self._wake.wait()
                continue
            while self._tokens >= 1.0 and (self._first or self._rest):
                waiter = (self._first or self._rest).popleft()
                if not waiter.done():  # a cancelled waiter takes nothing
                    self._tokens -= 1.0
                    waiter.set_result(None)

    @property
    def _batch(self) -> float:
        return max(1.0, min(self._rate * BATCH, float(self._burst)))

    def _refill(self, now: float) -> None:
        if self._updated is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._updated) * self._rate)
        self._updated = now


class Throttle:
    """`--kube-api-qps`/`--kube-api-burst` as upstream's operators apply them: a token
    bucket of that size per resource (pods, services, JobSets, ConfigMaps, a kind's
    jobs, ...), its subresources included.

    controller-runtime, which Kubeflow's training-operator and Trainer are built on,
    gives each resource kind a REST client of its own, and client-go gives each REST
    client its own token bucket: with `--kube-api-qps 20`, Trainer applies a
    TrainJob's JobSet and its runtime snapshot at 20 a second each. One bucket for
    every request would give tfjob a third of that budget for the same flags
    (docs/decisions/0039-a-token-bucket-per-resource.md). Requests to other paths
    (discovery, a pod's log) share one more bucket."""

    def __init__(self, qps: float, burst: int) -> None:
        self._qps = qps
        self._burst = burst or int(qps) or 1
        self._buckets: dict[str, TokenBucket] = {}

    def twin(self) -> Throttle:
        """The same limits, fresh buckets (a budget of its own)."""
        return Throttle(self._qps, self._burst)

    def bucket(self, resource: str) -> TokenBucket:
        found = self._buckets.get(resource)
        if found is None:
            found = self._buckets[resource] = TokenBucket(self._qps, self._burst)
        return found


class KubeClient:
    """The requests the operator makes, on a pool of keep-alive connections."""

    def __init__(
        self,
        server: str,
        pool: Pool,
        credentials: Credentials,
        throttle: Throttle | None = None,
    ) -> None:
        self._server = server.rstrip("/")
        self._origin = Origin.parse(self._server)  # its path, if any, prefixes every request
        self._pool = pool
        self._credentials = credentials
        self._throttle = throttle
        # Called with (method, status code) after every answer, for metrics.
        self.on_response: Callable[[str, int], None] = lambda _method, _code: None

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        qps: float = 0.0,
        burst: int = 0,
    ) -> KubeClient:
        """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG.

        Must be called with an event loop running (the connections belong to it).
        """
        return cls.from_connection(connection(kubeconfig), qps=qps, burst=burst)

    @classmethod
    def from_connection(cls, conn: Connection, *, qps: float = 0.0, burst: int = 0) -> KubeClient:
        # TLS is given per request (the credentials' current context), not here.
        throttle = Throttle(qps, burst) if qps > 0 else None
        return cls(conn.server, Pool(POOL_SIZE), conn.credentials, throttle)

    def with_own_budget(self) -> KubeClient:
        """The same connections and credentials with a throttle of its own (same QPS
        and burst): for Events, so their writes never use up the reconciles' budget
        (Events are a resource of their own anyway: see Throttle)."""
        throttle = self._throttle.twin() if self._throttle is not None else None
        twin = KubeClient(self._server, self._pool, self._credentials, throttle)
        twin.on_response = self.on_response
        return twin

    @property
    def server(self) -> str:
        return self._server

    async def close(self) -> None:
        await self._pool.close()

    # -- reading ----------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str, name: str) -> bytes:
        return await self._send("GET", resource.path(namespace, name))

    async def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str = "",
        limit: int = 500,
        continue_: str = "",
        accept: str = "",
    ) -> bytes:
        """One page of a list (`continue_` from the previous page's metadata).

        `accept`: another representation (METADATA_LIST: only the objects' metadata)."""
        params, headers = _list_query(limit, label_selector, accept, compressed=True)
        if continue_:
            params["continue"] = continue_
        return await self._send("GET", resource.path(namespace), params=params, headers=headers)

    async def list_pages(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: str = "",
        limit: int = 500,
        accept: str = "",
        compressed: bool = True,
    ) -> AsyncGenerator[bytes, None]:
        """Every page of a list, in order, each asked for before the last one is read.

        `compressed=False` asks the API server not to gzip the pages (it does for
        answers over 128 KB): see the informer for when that is cheaper.

        A page's `continue` token is in its metadata, at the start of the page: as
        soon as a page's first bytes name it, the next page is asked for, so the API
        server produces page k+1 while page k is still being read and decoded here.
        At most two pages are asked for at a time (the one being read and the next),
        so a slow reader holds at most three. A page that fails raises here, at its
        turn."""
        params, headers = _list_query(limit, label_selector, accept, compressed=compressed)
        path = resource.path(namespace)
        pending: collections.deque[asyncio.Future[bytes]] = collections.deque()
        deferred: list[str] = []  # a token known while a page was already asked ahead

        def ask(token: str) -> None:
            if pending:  # one page ahead of the one being read is enough
                deferred.append(token)
                return
            query = {**params, "continue": token} if token else params
            pending.append(asyncio.ensure_future(self._list_page(path, query, headers, ask)))

        ask("")
        current: asyncio.Future[bytes] | None = None
        try:
            while pending:
                current = pending.popleft()  # not kept once read: a page is ~5 MB
                if deferred:
                    ask(deferred.pop())
                page = await current
                current = None
                yield page
        finally:
            waiting = [*pending, *([current] if current is not None else [])]
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)

    async def _list_page(
        self,
        path: str,
        params: dict[str, str],
        headers: dict[str, str],
        ask: Callable[[str], None],
    ) -> bytes:
        """One page, read as it arrives: `ask(token)` once its continue token is known
        (not called for the last page)."""

        async def read(response: Response) -> bytes:
            if response.status < 300:
                return await _page_body(response, ask)
            return await response.read()

        return await self._send("GET", path, params=params, headers=headers, read=read)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 300,
        accept: str = "",
    ) -> AsyncGenerator[bytes, None]:
        """The watch events after `resource_version`, one JSON line each, bookmarks on.

        Ends when the server closes the watch (after `timeout_seconds`); raises
        ApiError for an error answer; an ERROR event is left to the caller to decode.
        """
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        # A dead connection shows up as silence: bookmarks arrive at least every minute,
        # so no bytes for a while past the server-side timeout means it is gone.
        stream = self._stream(
            resource.path(namespace),
            params,
            {"Accept": accept} if accept else {},
            silence=timeout_seconds + WATCH_SILENCE,
            timeout_message="watch went silent",
        )
        async for line in stream:
            yield line

    async def get_path(self, path: str, params: dict[str, str] | None = None) -> bytes:
        """GET any path (discovery, a field-selected list, a finished pod's log)."""
        return await self._send("GET", path, params=params)

    async def stream_lines(
        self, path: str, params: dict[str, str] | None = None
    ) -> AsyncGenerator[bytes, None]:
        """GET a path whose answer never ends by itself (a followed pod log), line by
        line, for as long as the server keeps it open; no overall time limit."""
        stream = self._stream(
            path, params, {}, silence=None, timeout_message=f"GET {path}: no answer in time"
        )
        async for line in stream:
            yield line

    # -- writing ----------------------------------------------------------------------

    async def create(
        self, resource: Resource, namespace: str, body: dict[str, Any], *, dry_run: bool = False
    ) -> bytes:
        """POST; `dry_run` has it validated and admitted but not stored."""
        params = {"dryRun": "All"} if dry_run else None
        return await self._send("POST", resource.path(namespace), params=params, body=body)

    async def replace(
        self, resource: Resource, namespace: str, name: str, body: dict[str, Any]
    ) -> bytes:
        """PUT; `body.metadata.resourceVersion` makes it conditional (409 if stale)."""
        return await self._send("PUT", resource.path(namespace, name), body=body)

    async def replace_status(
        self, resource: Resource, namespace: str, name: str, body: dict[str, Any]
    ) -> bytes:
        """PUT the status subresource: only `status` is taken from `body`.

        Ahead of the other requests in the token bucket (TokenBucket): a job's status
        reports what already happened and should not wait behind queued creates."""
        path = resource.path(namespace, name, "status")
        return await self._send("PUT", path, body=body, first=True)

    async def merge_patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        subresource: str = "",
    ) -> bytes:
        return await self._send(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type="application/merge-patch+json",
        )

    async def apply(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        field_manager: str,
        force: bool = False,
    ) -> bytes:
        """Server-side apply `body` (JSON is YAML) as `field_manager`; `force` takes the
        fields another manager owns instead of answering 409."""
        params = {"fieldManager": field_manager}
        if force:
            params["force"] = "true"
        return await self._send(
            "PATCH",
            resource.path(namespace, name),
            params=params,
            body=body,
            content_type="application/apply-patch+yaml",
        )

    async def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        propagation: str = "",
        uid: str = "",
    ) -> bytes | None:
        """Delete; the API server's answer (the object as deleted, or as marked for
        deletion), None if it was already gone (404 is not an error here). With `uid`,
        only the object of that uid: another under the name (409, the precondition
        failed) means that one is gone too, so None."""
        body: dict[str, Any] = {}
        if propagation:
            body["propagationPolicy"] = propagation
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            return await self._send("DELETE", resource.path(namespace, name), body=body or None)
        except ApiError as error:
            if error.not_found or (uid and error.code == 409):
                return None
            raise

    # -- internals --------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
        first: bool = False,
        headers: dict[str, str] | None = None,
        read: Callable[[Response], Awaitable[bytes]] | None = None,
    ) -> bytes:
        """One request: throttled, authenticated (a 401 refreshes the credentials and
        retries once), its answer read whole (or by `read`), errors mapped."""
        if self._throttle is not None:
            await self._throttle.bucket(_resource_of(path)).take(first=first)
        content = _encode(body) if body is not None else None
        target = _target(path, params)
        extra = {**HEADERS, **headers} if headers else HEADERS
        for attempt in (1, 2):
            auth = await self._credentials.auth()
            sent = {**extra, **auth.headers}
            if content is not None:
                sent["Content-Type"] = content_type
            try:
                status, payload = await self._pool.fetch(
                    method,
                    self._origin,
                    target,
                    sent,
                    content,
                    tls=auth.tls,
                    server_hostname=auth.server_hostname,
                    read=read,
                    total=REQUEST_TIMEOUT,
                )
            except TimeoutError as error:  # an OSError too: must come first
                raise RequestTimeout(f"{method} {path}: no answer in time") from error
            except (HttpError, OSError) as error:
                raise TransportError(str(error) or type(error).__name__) from error
            self.on_response(method, status)
            if status == 401 and attempt == 1 and await self._credentials.refresh(auth):
                continue  # a rotated token or certificate, a re-run exec plugin
            if status >= 300:
                raise _error(status, payload)
            return payload
        raise AssertionError("unreachable")

    async def _stream(
        self,
        path: str,
        params: dict[str, str] | None,
        headers: dict[str, str],
        *,
        silence: float | None,
        timeout_message: str,
    ) -> AsyncGenerator[bytes, None]:
        """A GET whose answer goes on (a watch, a followed log), line by line; no
        overall time limit, `silence`: seconds without a byte that end it (None: no
        limit). Errors mapped as `_send` maps them; no 401 retry (the caller starts
        the stream again, with the credentials a 401 elsewhere refreshed)."""
        auth = await self._credentials.auth()
        try:
            response = await self._pool.open(
                "GET",
                self._origin,
                _target(path, params),
                {**HEADERS, **headers, **auth.headers},
                tls=auth.tls,
                server_hostname=auth.server_hostname,
                read_timeout=silence,
                connect_timeout=REQUEST_TIMEOUT,
            )
            try:
                if response.status >= 300:
                    raise _error(response.status, await response.read())
                async for line in _lines(response):
                    yield line
            finally:
                response.release()
        except TimeoutError as error:  # an OSError too: must come first
            raise RequestTimeout(timeout_message) from error
        except (HttpError, OSError) as error:
            raise TransportError(str(error) or type(error).__name__) from error


def _resource_of(path: str) -> str:
    """The resource a path names (`/apis/g/v/namespaces/ns/jobsets/x/status` ->
    `g/jobsets`), or "" for any other path (discovery, /version)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return f"{group}/{rest[0]}" if rest else ""


def _target(path: str, params: dict[str, str] | None) -> str:
    return f"{path}?{urlencode(params)}" if params else path


def _list_query(
    limit: int, label_selector: str, accept: str, *, compressed: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """A list request's query parameters and headers."""
    params = {"limit": str(limit)}
    if label_selector:
        params["labelSelector"] = label_selector
    headers = {"Accept": accept} if accept else {}
    if not compressed:
        headers["Accept-Encoding"] = "identity"
    return params, headers


_HEAD = 1 << 16  # bytes read looking for the continue token before reading the whole page


async def _page_body(response: Response, ask: Callable[[str], None]) -> bytes:
    """A list page's body; `ask(token)` as soon as its first bytes tell its continue
    token (decode.continue_token reads it, from JSON or protobuf), or else once the
    whole page is read, before anyone decodes it; never for the last page."""
    chunks: list[bytes] = []
    head = b""
    token: str | None = None
    async for chunk in response.chunks():
        chunks.append(chunk)
        if token is None and len(head) <= _HEAD:
            head += chunk
            token = continue_token(head)
            if token:
                ask(token)
    body = b"".join(chunks)
    if token is None:
        token = continue_token(body, complete=True)
        if token:
            ask(token)
    return body


def _error(code: int, payload: bytes) -> ApiError:
    status = decode_status(payload)
    return ApiError(status.code or code, status.reason, status.message)


async def _lines(response: Response) -> AsyncGenerator[bytes, None]:
    """Newline-delimited JSON, as bytes (no str round trip: msgspec decodes bytes)."""
    pending = b""
    async for chunk in response.chunks():
        pending += chunk
        if b"\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending
