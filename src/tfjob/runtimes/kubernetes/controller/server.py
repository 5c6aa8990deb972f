"""HTTP endpoints on the operator's own event loop: /metrics, /healthz and /readyz.

Same ports and paths as upstream (metrics :8080, probes :8081), so the Deployment's
probes and Prometheus scrape configs carry over. Running them on the event loop (not
a thread) means a wedged loop also fails the liveness probe, which is the point.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tfjob.runtimes.kubernetes.controller.metrics import Metrics


def metrics_app(metrics: Metrics) -> web.Application:
    async def serve(_request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", serve)
    return app


def health_app(ready: Callable[[], bool]) -> web.Application:
    """`/healthz` answers while the loop runs; `/readyz` once the caches are synced."""

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


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
        self._apps = [(metrics_app(metrics), metrics_port), (health_app(ready), health_port)]
        self._host = host
        self._runners: list[web.AppRunner] = []

    async def start(self) -> None:
        for app, port in self._apps:
            if port < 0:
                continue  # disabled
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, self._host, port).start()
            self._runners.append(runner)

    def addresses(self) -> list[str]:
        """Where the endpoints listen (useful with port 0)."""
        found = []
        for runner in self._runners:
            for address in runner.addresses:
                host, port = address[0], address[1]
                found.append(f"http://{host}:{port}")
        return found

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
