"""A thin async Kubernetes client of ours: raw JSON in, raw JSON out.

Why not lightkube's AsyncClient directly: it decodes every response into its own
models, which on the hot path (lists and watch events of thousands of pods) costs
~10x the time and ~8x the memory of decoding straight into our projections
(docs/kubernetes-runtime.md has the measurements), and its watch cannot ask for
bookmarks. So lightkube does what it is good at - reading kubeconfig or in-cluster
credentials and building an authenticated, TLS-verified httpx client - and this module
sends the few requests the operator needs on that connection and hands back bytes.
Every lightkube import stays in this module, so a lightkube upgrade touches one file.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx2 as httpx
import msgspec

from tfjob import __version__
from tfjob.runtimes.kubernetes.decode import decode_status
from tfjob.runtimes.kubernetes.resources import Resource

USER_AGENT = f"tfjob-operator/{__version__}"
REQUEST_TIMEOUT = 30.0
_encode = msgspec.json.encode


class ApiError(Exception):
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
    """

    def __init__(self, qps: float, burst: int) -> None:
        self._rate = qps
        self._burst = max(burst, 1)
        self._tokens = float(self._burst)
        self._updated = 0.0
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        async with self._lock:
            loop = asyncio.get_running_loop()
            now = loop.time()
            if self._updated:
                self._tokens = min(self._burst, self._tokens + (now - self._updated) * self._rate)
            self._updated = now
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self._rate)
                self._tokens = 1.0
                self._updated = loop.time()
            self._tokens -= 1.0


class KubeClient:
    """The requests the operator makes, on one pooled connection to the API server."""

    def __init__(self, http: httpx.AsyncClient, throttle: TokenBucket | None = None) -> None:
        self._http = http
        self._throttle = throttle

    @classmethod
    def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        http2: bool = False,
        qps: float = 0.0,
        burst: int = 0,
    ) -> KubeClient:
        """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG."""
        from lightkube.config import client_adapter
        from lightkube.config.kubeconfig import KubeConfig

        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        params = client_adapter.ConnectionParams(
            timeout=httpx.Timeout(REQUEST_TIMEOUT), http2=http2
        )
        single = config.get()
        if single is None:
            raise ValueError("the kubeconfig has no current context")
        http = client_adapter.AsyncClient(single, params)
        http.headers["User-Agent"] = USER_AGENT
        http.headers["Accept"] = "application/json"
        return cls(http, TokenBucket(qps, burst or int(qps) or 1) if qps > 0 else None)

    @property
    def server(self) -> str:
        return str(self._http.base_url)

    async def close(self) -> None:
        await self._http.aclose()

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
    ) -> bytes:
        """One page of a list (`continue_` from the previous page's metadata)."""
        params: dict[str, str | int] = {"limit": limit}
        if label_selector:
            params["labelSelector"] = label_selector
        if continue_:
            params["continue"] = continue_
        return await self._send("GET", resource.path(namespace), params=params)

    async def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[bytes, None]:
        """The watch events after `resource_version`, one JSON line each, bookmarks on.

        Ends when the server closes the watch (after `timeout_seconds`); raises
        ApiError for an error answer; an ERROR event is left to the caller to decode.
        """
        params: dict[str, str | int] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        if label_selector:
            params["labelSelector"] = label_selector
        # A dead connection shows up as silence: bookmarks arrive at least every minute,
        # so no bytes for a while past the server-side timeout means it is gone.
        timeout = httpx.Timeout(REQUEST_TIMEOUT, read=timeout_seconds + 60.0)
        request = self._http.build_request(
            "GET", resource.path(namespace), params=params, timeout=timeout
        )
        response = await self._http.send(request, stream=True)
        try:
            if response.status_code >= 300:
                await response.aread()
                raise _error(response)
            async for line in _lines(response):
                yield line
        finally:
            await response.aclose()

    # -- writing ----------------------------------------------------------------------

    async def create(self, resource: Resource, namespace: str, body: dict[str, Any]) -> bytes:
        return await self._send("POST", resource.path(namespace), body=body)

    async def replace(
        self, resource: Resource, namespace: str, name: str, body: dict[str, Any]
    ) -> bytes:
        """PUT; `body.metadata.resourceVersion` makes it conditional (409 if stale)."""
        return await self._send("PUT", resource.path(namespace, name), body=body)

    async def replace_status(
        self, resource: Resource, namespace: str, name: str, body: dict[str, Any]
    ) -> bytes:
        """PUT the status subresource: only `status` is taken from `body`."""
        return await self._send("PUT", resource.path(namespace, name, "status"), body=body)

    async def merge_patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> bytes:
        return await self._send(
            "PATCH",
            resource.path(namespace, name),
            body=patch,
            content_type="application/merge-patch+json",
        )

    async def delete(
        self, resource: Resource, namespace: str, name: str, *, propagation: str = ""
    ) -> bool:
        """Delete; False if it was already gone (404 is not an error here)."""
        body = {"propagationPolicy": propagation} if propagation else None
        try:
            await self._send("DELETE", resource.path(namespace, name), body=body)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return True

    # -- internals --------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | int] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> bytes:
        if self._throttle is not None:
            await self._throttle.take()
        content = _encode(body) if body is not None else None
        headers = {"Content-Type": content_type} if content is not None else None
        response = await self._http.request(
            method, path, params=params, content=content, headers=headers
        )
        if response.status_code >= 300:
            raise _error(response)
        return response.content


def _error(response: httpx.Response) -> ApiError:
    status = decode_status(response.content)
    return ApiError(status.code or response.status_code, status.reason, status.message)


async def _lines(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """Newline-delimited JSON, as bytes (no str round trip: msgspec decodes bytes)."""
    pending = b""
    async for chunk in response.aiter_bytes():
        pending += chunk
        if b"\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


@contextlib.asynccontextmanager
async def connected(kubeconfig: str | None, *, http2: bool = False) -> AsyncIterator[KubeClient]:
    """A client closed on exit."""
    client = KubeClient.connect(kubeconfig, http2=http2)
    try:
        yield client
    finally:
        await client.close()
