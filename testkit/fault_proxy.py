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

It runs an aiohttp server on its own event loop in a thread, so a synchronous test
drives it while the operator runs as a subprocess.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from testkit import fast_yaml

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "upgrade",
}
_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


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
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
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

    # -- the server ---------------------------------------------------------------------

    def _serve(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start_server())
        ready.set()
        self._loop.run_forever()

    async def _start_server(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=256),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a handler relaying a watch ends when its client goes.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            handler_cancellation=True,
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def _shutdown(self) -> None:
        await self._cut()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

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

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path
        watch = request.query.get("watch") in ("true", "1")
        body = await request.read()
        rule = self._choose(method, path, watch)
        fault = rule.fault if rule is not None else ""
        if rule is not None and fault == "delay":
            await asyncio.sleep(rule.delay)
        if fault in ("429", "500", "503"):
            return _status(int(fault))
        if fault == "reset-before":
            return _reset(request)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        assert self._session is not None
        try:
            async with self._session.request(
                method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            ) as upstream:
                if fault == "reset-after":
                    await upstream.read()
                    return _reset(request)
                self.requests[f"{method} {_resource(path)}"] += 1
                return await self._relay(request, upstream, watch)
        except (aiohttp.ClientError, OSError):
            return _reset(request)  # the API server went away: so does the answer

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, watch: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status)
        for key, value in upstream.headers.items():
            if key.lower() not in _HOP_BY_HOP:
                response.headers[key] = value
        await response.prepare(request)
        transport = request.transport
        if watch and transport is not None:
            self._watches[transport] = asyncio.current_task()
        lifetime = self._watch_deadline() if watch else None
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
                if lifetime is not None and asyncio.get_running_loop().time() > lifetime:
                    _abort(request)
                    break
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientError, OSError):
            pass
        finally:
            if transport is not None:
                self._watches.pop(transport, None)
        return response

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


def _status(code: int) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f"injected by the fault proxy ({code})",
        "reason": _REASONS.get(code, "InternalError"),
        "code": code,
    }
    headers = {"Retry-After": "1"} if code == 429 else {}
    return web.json_response(body, status=code, headers=headers)


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _reset(request: web.Request) -> web.StreamResponse:
    """Drop the connection without an answer (the handler's return goes nowhere)."""
    _abort(request)
    return web.Response(status=499)


def token_of(kubeconfig: Path) -> str:
    """The bearer token of a test kubeconfig (testkit/controlplane.py writes them)."""
    config = fast_yaml.load(kubeconfig.read_text())
    return str(config["users"][0]["user"]["token"])
