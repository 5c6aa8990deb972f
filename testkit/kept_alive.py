"""HTTPS connections to one test API server, kept open and reused per thread.

The tests poll the API server all the time (``wait_for`` every 50-100 ms). A new
connection per request costs a TLS handshake: measured on a test control plane,
~2.3 ms of the test's CPU and ~3 ms of kube-apiserver's per request, most of it the
handshake, on a 2-core machine that runs two suites' worth of clusters at once. One
kept-alive connection per thread (threads: tests that run scenarios side by side)
pays it once.
"""

from __future__ import annotations

import http.client
import select
import ssl
import threading
import urllib.parse
from pathlib import Path

#: What a kept connection the server has closed in the meantime raises on reuse
#: (an idle timeout, an API server restarted by a test): the request never got an
#: answer, so sending it once more on a fresh connection cannot do it twice.
_STALE = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class KeptConnections:
    """One HTTPS connection per thread to ``server``, verified with ``ca_path``."""

    def __init__(self, server: str, ca_path: Path, timeout: float = 10.0) -> None:
        url = urllib.parse.urlsplit(server)
        if url.hostname is None:
            raise ValueError(f"no host in {server!r}")
        self.host, self.port = url.hostname, url.port
        self.timeout = timeout
        self._context = ssl.create_default_context(cafile=str(ca_path))
        self._local = threading.local()

    def send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """The status and body of one request; OSError (or ssl.SSLError) when the
        server cannot be reached."""
        kept: http.client.HTTPSConnection | None = getattr(self._local, "connection", None)
        if kept is not None and _dropped(kept):
            self._drop()
            kept = None
        if kept is not None:
            try:
                return self._exchange(kept, method, path, body, headers)
            except _STALE:
                self._drop()
        return self._exchange(self._connect(), method, path, body, headers)

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        self._drop()

    def _connect(self) -> http.client.HTTPSConnection:
        connection = http.client.HTTPSConnection(
            self.host, self.port, context=self._context, timeout=self.timeout
        )
        self._local.connection = connection
        return connection

    def _exchange(
        self,
        connection: http.client.HTTPSConnection,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes]:
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except BaseException:
            self._drop()
            raise
        if response.will_close:
            self._drop()
        return response.status, data

    def _drop(self) -> None:
        connection: http.client.HTTPSConnection | None = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()


def _dropped(connection: http.client.HTTPSConnection) -> bool:
    """Whether the server closed the idle connection: nothing is owed on it, so a
    readable socket can only be the close (or a TLS alert before it)."""
    sock = connection.sock
    if sock is None:
        return True
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)
