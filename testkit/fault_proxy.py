"""A fault-injecting HTTP proxy between the operator and the real API server (tests).

The operator talks plain HTTP to the proxy (a kubeconfig from `write_kubeconfig`, with
the caller's bearer token); the proxy forwards each request over TLS to the API server
and streams the answer back, watches included. Rules decide, per request, whether it
instead gets a fault:
- an error status (429 with Retry-After, 500, 503) as a metav1.Status, not forwarded;
- a reset before forwarding (the connection is dropped; nothing happened);
- a reset after forwarding (the API server carried the request out, the client never
  hears so - the case a retried POST or DELETE must survive);
- a delay before forwarding;
and `cut_watches()` (or `watch_lifetime`) drops every open watch stream mid-flight.
Faults are drawn from a seeded random generator, so a failing run can be replayed,
and every injected fault is counted in `injected` for the test to assert on.

It is a small HTTP/1.1 server of its own on `asyncio.start_server` (keep-alive, as
the operator's client uses it), forwarding through tfjob's own client
(transport/http1.py), on its own event loop in a thread, so a synchronous test drives
it while the operator runs as a subprocess. It counts the connections its clients
hold open (`open_connections`, `most_connections`): what the API server would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from testkit import fast_yaml
from tfjob.runtimes.kubernetes.transport.http1 import HttpError, Origin, Pool, Response

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "upgrade",
    "accept-encoding",  # the API server answers the proxy uncompressed; it relays as is
}
_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
_HEAD_LIMIT = 1 << 20


@dataclass
class _Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def watch(self) -> bool:
        return parse_qs(urlsplit(self.target).query).get("watch", [""])[0] in ("true", "1")


@dataclass
class Rule:
    """One kind of fault and the requests it may hit.

    `fault`: "429", "500", "503", "reset-before", "reset-after" or "delay".
    `match(method, path)` (default: every request that is not a watch) selects the
    requests; `probability` is the chance for each selected one; `times` caps how many
    faults the rule injects (None: no cap).
    """

    fault: str
    probability: float = 1.0
    match: Callable[[str, str], bool] = lambda _method, _path: True
    times: int | None = None
    delay: float = 0.0
    injected: int = 0

    def applies(self, method: str, path: str, draw: float) -> bool:
        if self.times is not None and self.injected >= self.times:
            return False
        return self.match(method, path) and draw < self.probability


def deletes_of(resource: str) -> Callable[[str, str], bool]:
    """Match DELETEs of one resource kind ("pods", "services", ...)."""
    return lambda method, path: method == "DELETE" and f"/{resource}/" in path


def writes() -> Callable[[str, str], bool]:
    """Match every write (POST, PUT, PATCH, DELETE)."""
    return lambda method, _path: method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class FaultProxy:
    upstream: str
    ca: Path
    seed: int = 0
    rules: list[Rule] = field(default_factory=list)
    watch_lifetime: float | None = None  # cut each watch after up to this many seconds
    injected: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)  # "METHOD resource" answered
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    open_connections: int = 0  # clients' connections open now
    most_connections: int = 0  # the most open at once
    connections_made: int = 0  # clients' connections accepted in all
    _idle: set[asyncio.StreamWriter] = field(default_factory=set)  # between two requests
    _server: asyncio.Server | None = None
    _pool: Pool | None = None
    _upstream: Origin | None = None
    _context: ssl.SSLContext | None = None
    _watches: dict[asyncio.BaseTransport, asyncio.Task[Any] | None] = field(default_factory=dict)
    _random: random.Random = field(default_factory=random.Random)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._random.seed(self.seed)
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: Path, *, token: str, namespace: str = "default") -> Path:
        """A kubeconfig that reaches the API server through this proxy."""
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faulty", "cluster": {"server": self.url}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "faulty",
                    "context": {"cluster": "faulty", "user": "user", "namespace": namespace},
                }
            ],
            "current-context": "faulty",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # -- controls from the test ---------------------------------------------------------

    def set_rules(self, *rules: Rule) -> None:
        with self._lock:
            self.rules = list(rules)

    def cut_watches(self) -> int:
        """Drop every open watch stream now; how many were cut."""
        if self._loop is None:
            return 0
        future = asyncio.run_coroutine_threadsafe(self._cut(), self._loop)
        return future.result(10)

    def close_idle_connections(self) -> int:
        """Close (FIN, as a server's idle timeout does) every client connection
        waiting for its next request; how many."""
        assert self._loop is not None

        async def close() -> int:
            idle = list(self._idle)
            for writer in idle:
                writer.close()
            return len(idle)

        return asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)

    # -- the server ---------------------------------------------------------------------

    def _serve(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start_server())
        ready.set()
        self._loop.run_forever()

    async def _start_server(self) -> None:
        self._context = ssl.create_default_context(cafile=str(self.ca))
        self._upstream = Origin.parse(self.upstream)
        self._pool = Pool(limit=256)
        self._server = await asyncio.start_server(
            self._connection, "127.0.0.1", 0, limit=_HEAD_LIMIT
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _shutdown(self) -> None:
        await self._cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._server.wait_closed()
        if self._pool is not None:
            await self._pool.close()

    async def _cut(self) -> int:
        cut = len(self._watches)
        for transport, task in list(self._watches.items()):
            transport.abort()  # type: ignore[attr-defined]
            if task is not None:
                task.cancel()
        self._watches.clear()
        return cut

    def _choose(self, method: str, path: str, watch: bool) -> Rule | None:
        if watch:
            return None
        with self._lock:
            for rule in self.rules:
                if rule.applies(method, path, self._random.random()):
                    rule.injected += 1
                    self.injected[rule.fault] += 1
                    return rule
        return None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection: its requests one after the other (keep-alive)."""
        self.open_connections += 1
        self.connections_made += 1
        self.most_connections = max(self.most_connections, self.open_connections)
        try:
            while True:
                self._idle.add(writer)
                try:
                    request = await _read_request(reader)
                finally:
                    self._idle.discard(writer)
                if request is None or not await self._handle(request, reader, writer):
                    break
        except (OSError, HttpError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self.open_connections -= 1
            writer.transport.abort()

    async def _handle(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request (or inject its fault); False: the connection is done."""
        method, path, watch = request.method, request.path, request.watch
        rule = self._choose(method, path, watch)
        fault = rule.fault if rule is not None else ""
        if rule is not None and fault == "delay":
            await asyncio.sleep(rule.delay)
        if fault in ("429", "500", "503"):
            writer.write(_status(int(fault)))
            await writer.drain()
            return True
        if fault == "reset-before":
            return False  # dropped without an answer
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
        assert self._pool is not None and self._upstream is not None
        try:
            upstream = await self._pool.open(
                method,
                self._upstream,
                request.target,
                headers,
                request.body or None,
                tls=self._context,
                connect_timeout=5.0,
            )
        except (OSError, HttpError):
            return False  # the API server went away: so does the answer
        try:
            if fault == "reset-after":
                await upstream.read()
                return False
            self.requests[f"{method} {_resource(path)}"] += 1
            return await self._relay(method, upstream, reader, writer, watch)
        except (OSError, HttpError):
            return False
        finally:
            upstream.release()

    async def _relay(
        self,
        method: str,
        upstream: Response,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        watch: bool,
    ) -> bool:
        """The API server's answer, re-framed chunked, piece by piece as it comes; a
        watch ends when its client goes (its socket's end is read meanwhile)."""
        status = upstream.status
        head = [f"HTTP/1.1 {status} {_phrase(status)}\r\n"]
        head += [f"{k}: {v}\r\n" for k, v in upstream.headers.items() if k not in _HOP_BY_HOP]
        if method == "HEAD" or status in (204, 304):  # no body
            writer.write("".join([*head, "\r\n"]).encode("latin-1"))
            await writer.drain()
            return True
        head.append("Transfer-Encoding: chunked\r\n\r\n")
        writer.write("".join(head).encode("latin-1"))
        transport = writer.transport
        gone: asyncio.Task[bytes] | None = None
        if watch:
            relay = asyncio.current_task()
            self._watches[transport] = relay

            def client_gone(done: asyncio.Task[bytes]) -> None:
                if not done.cancelled() and relay is not None:
                    relay.cancel()  # its client went: stop relaying

            gone = asyncio.ensure_future(reader.read(1))
            gone.add_done_callback(client_gone)
        lifetime = self._watch_deadline() if watch else None
        try:
            async for chunk in upstream.chunks():
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                if lifetime is not None and asyncio.get_running_loop().time() > lifetime:
                    return False
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return not watch
        finally:
            if gone is not None:
                gone.cancel()
            self._watches.pop(transport, None)

    def _watch_deadline(self) -> float | None:
        if self.watch_lifetime is None:
            return None
        with self._lock:
            seconds = self._random.uniform(0.2, self.watch_lifetime)
        return asyncio.get_running_loop().time() + seconds


def _resource(path: str) -> str:
    """ "pods", "services", "tfjobs", "events", ... from an API path."""
    parts = [p for p in path.split("/") if p]
    if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
        return parts[parts.index("namespaces") + 2]
    return parts[-1] if parts else ""


def _status(code: int) -> bytes:
    """An error answer as the API server words one (a metav1.Status)."""
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"injected by the fault proxy ({code})",
            "reason": _REASONS.get(code, "InternalError"),
            "code": code,
        }
    ).encode()
    retry = "Retry-After: 1\r\n" if code == 429 else ""
    head = (
        f"HTTP/1.1 {code} {_phrase(code)}\r\nContent-Type: application/json\r\n{retry}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "-"


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """The next request on a connection; None at its end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", ""):
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += await reader.readexactly(size + 2)
            body = body[:-2]
        await reader.readuntil(b"\r\n")
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return _Request(method, target, headers, body)


def token_of(kubeconfig: Path) -> str:
    """The bearer token of a test kubeconfig (testkit/controlplane.py writes them)."""
    config = fast_yaml.load(kubeconfig.read_text())
    return str(config["users"][0]["user"]["token"])
