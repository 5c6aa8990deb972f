"""HTTP endpoints on the operator's own event loop: /metrics, /healthz and /readyz.

Same ports and paths as upstream (metrics :8080, probes :8081), so the Deployment's
probes and Prometheus scrape configs carry over. Running them on the event loop (not
a thread) means a wedged loop also fails the liveness probe, which is the point.

Three GET paths, each answered whole and the connection closed: a plain asyncio
server (`asyncio.start_server`) is all they need. aiohttp's web server would add
some 2 MB to the operator's memory (its modules), for nothing these paths use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tfjob.runtimes.kubernetes.controller.metrics import Metrics

#: One answer: status, content type, body.
Answer = tuple[int, str, bytes]
Route = Callable[[], Answer]
_TEXT = "text/plain; charset=utf-8"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
_REQUEST_SECONDS = 10.0  # a client that sends no full request head in time is dropped
_HEAD_LIMIT = 64 * 1024


def metrics_routes(metrics: Metrics) -> dict[str, Route]:
    def serve() -> Answer:
        return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)

    return {"/metrics": serve}


def health_routes(ready: Callable[[], bool]) -> dict[str, Route]:
    """`/healthz` answers while the loop runs; `/readyz` once the caches are synced."""

    def healthz() -> Answer:
        return 200, _TEXT, b"ok"

    def readyz() -> Answer:
        if ready():
            return 200, _TEXT, b"ok"
        return 503, _TEXT, b"caches not synced"

    return {"/healthz": healthz, "/readyz": readyz}


def _answer(routes: dict[str, Route], head: bytes) -> Answer:
    """The answer to a request head (`GET /path?query HTTP/1.1` and headers)."""
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) != 3:
        return 400, _TEXT, b"bad request"
    method, target = parts[0], parts[1].decode("latin-1")
    route = routes.get(target.split("?", 1)[0])
    if route is None:
        return 404, _TEXT, b"404: Not Found"
    if method not in (b"GET", b"HEAD"):
        return 405, _TEXT, b"method not allowed"
    status, content_type, body = route()
    return status, content_type, b"" if method == b"HEAD" else body


def _handler(
    routes: dict[str, Route],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > _HEAD_LIMIT:
                return
            status, content_type, body = _answer(routes, head)
            writer.write(
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return handle


class Servers:
    """Both endpoints, started and stopped together."""

    def __init__(
        self,
        metrics: Metrics,
        ready: Callable[[], bool],
        *,
        host: str,
        metrics_port: int,
        health_port: int,
    ) -> None:
        self._routes = [
            (metrics_routes(metrics), metrics_port),
            (health_routes(ready), health_port),
        ]
        self._host = host
        self._servers: list[asyncio.Server] = []

    async def start(self) -> None:
        for routes, port in self._routes:
            if port < 0:
                continue  # disabled
            server = await asyncio.start_server(
                _handler(routes), self._host, port, limit=_HEAD_LIMIT, reuse_address=True
            )
            self._servers.append(server)

    def addresses(self) -> list[str]:
        """Where the endpoints listen (useful with port 0)."""
        found = []
        for server in self._servers:
            for sock in server.sockets:
                address = sock.getsockname()
                found.append(f"http://{address[0]}:{address[1]}")
        return found

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
