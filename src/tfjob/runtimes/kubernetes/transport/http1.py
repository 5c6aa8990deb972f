"""The operator's HTTP/1.1 client: keep-alive connections on asyncio, nothing more.

Why our own (docs/decisions/0037-own-http-client.md): the operator sends a few kinds
of request to one API server, and aiohttp's machinery around each (a timer, tracing
hooks, cookies, URL objects, multidicts) cost about half the CPU of a write, and its
modules about 9 MB of the operator's memory. This module does what those requests
need and no more:

- a pool of keep-alive connections per (host, port, TLS context, server name), at
  most POOL_LIMIT open in all (requests wait their turn when it is full), an idle one
  closed after IDLE_SECONDS (the API server closes them after 90 s); a connection the
  peer closed while idle is seen before it is used, and a read (GET, HEAD) that fails
  on a reused connection before any byte of its answer came back is sent once more on
  a new one: the server may have closed it as the request went. As Go's transport, a
  write is not sent again (the server may have carried it out: the caller knows
  whether a write can be repeated, this module does not);
- one write per request (head and body together);
- answers framed by Content-Length, chunked transfer-encoding or the connection's
  end, gzip-decoded, read whole or piece by piece as they arrive (watches, list
  pages, followed logs);
- a total timeout for one-shot requests, a read-silence timeout for streams.

Not done: proxies (aiohttp's trust_env was never on), redirects (never followed: the
credentials must not go to another host), HTTP/2, cookies, Expect: 100-continue.

Errors: a timeout raises TimeoutError; a refused, reset or closed connection OSError
(ssl.SSLError among them); an answer that is not HTTP/1.1, or ends early, HttpError.

asyncio's TLS transport (`asyncio.sslproto.SSLProtocol`) keeps a read buffer of
`max_size` (256 KB) per connection, zero-filled, and asks OpenSSL for up to that much
at each read (a 256 KB allocation each, cut to what came): with the operator's ten or
so connections, 2.5 MB held, and the biggest allocations of its hot path. The API
server's answers and watch events are a few KB, so this module, when imported, has it
read TLS_READ_SIZE at a time (a list of thousands of objects comes in more reads).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import collections
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from tfjob.api.errors import TemporaryError

#: Bytes asyncio's TLS transport reads at once (its own default: 256 KB).
TLS_READ_SIZE = 64 * 1024
POOL_LIMIT = 64  # connections open at once, all servers together (a burst reuses them)
IDLE_SECONDS = 60.0  # an idle connection is closed after this long
TOTAL_TIMEOUT = 30.0  # seconds for a one-shot request, from asking to its answer read
CONNECT_TIMEOUT = 30.0  # seconds to open a connection for a stream
HEAD_LIMIT = 256 * 1024  # bytes of status line and headers at most
PAUSE_AT = 1 << 20  # bytes buffered and not asked for: stop reading the socket
_GZIP = 16 + zlib.MAX_WBITS


def _smaller_tls_reads() -> None:
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and getattr(protocol, "max_size", 0) > TLS_READ_SIZE:
        setattr(protocol, "max_size", TLS_READ_SIZE)  # noqa: B010


_smaller_tls_reads()


class HttpError(TemporaryError):
    """The server's bytes are not an HTTP/1.1 answer, or the answer ended early (a
    proxy or server fault: the request may succeed when sent again)."""


@dataclass(frozen=True)
class Origin:
    """Where requests go: a server URL's scheme, host, port and path prefix.

    The prefix is kept: a server behind a proxy may carry a path
    (https://host/k8s/clusters/c-1) that every request's path goes under."""

    tls: bool
    host: str
    port: int
    prefix: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) server URL: {url!r}")
        port = parts.port or (443 if tls else 80)
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        default = port == (443 if tls else 80)
        return cls(tls, host, port, parts.path.rstrip("/"), shown if default else f"{shown}:{port}")


Key = tuple[str, int, ssl.SSLContext | None, str | None]


class _Connection(asyncio.Protocol):
    """One socket's bytes, buffered until asked for; knows when the peer closed it."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.received = 0  # bytes since the last request was sent
        self.idle_since = 0.0
        self.read_timeout: float | None = None  # seconds of silence a stream allows
        self._buffer = bytearray()
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self.received += len(data)
        if self._waiter is not None:
            self._wake()
        elif len(self._buffer) > PAUSE_AT and not self._paused and self.transport is not None:
            self._paused = True  # nobody reads: let TCP tell the server to wait
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._error = exc
        self._wake()

    # -- for the pool and the answer ----------------------------------------------------

    @property
    def usable(self) -> bool:
        """Idle and still open: no bytes nor end from the server since its last answer."""
        transport = self.transport
        return not (self._eof or self._buffer or transport is None or transport.is_closing())

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.received = 0
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self._eof = True

    async def read_some(self, most: int) -> bytes:
        """Up to `most` bytes, as soon as there are any; b"" at the connection's end."""
        while not self._buffer:
            if self._eof:
                return b""
            await self._wait()
        if len(self._buffer) <= most:
            data = bytes(self._buffer)
            self._buffer.clear()
        else:
            data = bytes(self._buffer[:most])
            del self._buffer[:most]
        return data

    async def read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if self._eof:
                raise self._ended()
            await self._wait()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_until(self, separator: bytes, limit: int) -> bytes:
        """The bytes up to and without `separator`, which is consumed too."""
        start = 0
        while (end := self._buffer.find(separator, start)) < 0:
            if len(self._buffer) > limit:
                raise HttpError(f"no {separator!r} in the first {limit} bytes of an answer")
            if self._eof:
                raise self._ended()
            start = max(0, len(self._buffer) - len(separator) + 1)
            await self._wait()
        data = bytes(self._buffer[:end])
        del self._buffer[: end + len(separator)]
        return data

    def _ended(self) -> OSError:
        if self._error is not None and isinstance(self._error, OSError):
            return self._error
        return ConnectionResetError("the server closed the connection before the answer ended")

    async def _wait(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            if self.read_timeout is None:
                await waiter
            else:
                async with asyncio.timeout(self.read_timeout):
                    await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._waiter = None


_Waiter = tuple[Key, "asyncio.Future[_Connection | None]"]


class Response:
    """An answer's status and headers; its body read by `read` or `chunks`, once.

    `release` must follow (a `finally`): the connection goes back to the pool if the
    body was read to its end and the server keeps it open, else it is closed."""

    def __init__(
        self, pool: Pool, connection: _Connection, status: int, headers: dict[str, str]
    ) -> None:
        self.status = status
        self.headers = headers  # names in lower case; repeated ones joined by ", "
        self._pool = pool
        self._connection: _Connection | None = connection
        self._done = False
        self._keep = headers.get("connection", "").lower() != "close"
        self._gzip = headers.get("content-encoding", "").lower() == "gzip"

    async def read(self) -> bytes:
        """The whole body, decoded."""
        if self._done:  # none (HEAD, 204, 304), or read already
            return b""
        length = self.headers.get("content-length")
        connection = self._connection
        if length is not None and "transfer-encoding" not in self.headers and connection:
            body = await connection.read_exactly(_length(length))
            self._done = True
            return _gunzip(body) if self._gzip else body
        return b"".join([piece async for piece in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, decoded, in pieces as they arrive (no piece is empty)."""
        pieces = self._raw()
        if not self._gzip:
            async for piece in pieces:
                yield piece
            return
        decoder = zlib.decompressobj(_GZIP)
        async for piece in pieces:
            try:
                plain = decoder.decompress(piece)
            except zlib.error as error:
                raise HttpError(f"a gzip body that does not decode: {error}") from None
            if plain:
                yield plain
        if not decoder.eof:
            raise HttpError("a gzip body cut short")

    def release(self) -> None:
        """Back to the pool if read to its end and kept open; closed otherwise."""
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.release(connection, reusable=self._done and self._keep)

    async def _raw(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None or self._done:
            return
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            pieces = _chunked(connection)
        elif (length := self.headers.get("content-length")) is not None:
            pieces = _sized(connection, _length(length))
        else:  # to the connection's end: it cannot carry another answer
            self._keep = False
            pieces = _to_end(connection)
        async for piece in pieces:
            yield piece
        self._done = True


async def _sized(connection: _Connection, size: int) -> AsyncIterator[bytes]:
    while size:
        piece = await connection.read_some(size)
        if not piece:
            raise connection._ended()
        size -= len(piece)
        yield piece


async def _chunked(connection: _Connection) -> AsyncIterator[bytes]:
    """Chunked transfer-encoding's data, each chunk's bytes as they arrive."""
    while True:
        line = await connection.read_until(b"\r\n", HEAD_LIMIT)
        try:
            size = int(line.split(b";", 1)[0], 16)
        except ValueError:
            raise HttpError(f"not a chunk size: {line[:40]!r}") from None
        if size == 0:
            while await connection.read_until(b"\r\n", HEAD_LIMIT):
                pass  # trailers: none used
            return
        async for piece in _sized(connection, size):
            yield piece
        if await connection.read_exactly(2) != b"\r\n":
            raise HttpError("a chunk not followed by CRLF")


async def _to_end(connection: _Connection) -> AsyncIterator[bytes]:
    while piece := await connection.read_some(1 << 20):
        yield piece


def _length(value: str) -> int:
    try:
        size = int(value)
    except ValueError:
        size = -1
    if size < 0:
        raise HttpError(f"not a Content-Length: {value!r}")
    return size


def _gunzip(body: bytes) -> bytes:
    try:
        return zlib.decompress(body, _GZIP)
    except zlib.error as error:
        raise HttpError(f"a gzip body that does not decode: {error}") from None


def _head(data: bytes) -> tuple[int, dict[str, str]]:
    """A status line and headers (without the blank line that ends them)."""
    status_line, *lines = data.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1."):
        raise HttpError(f"not an HTTP/1.x answer: {status_line[:60]!r}")
    try:
        status = int(rest[:3])
    except ValueError:
        raise HttpError(f"not a status line: {status_line[:60]!r}") from None
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise HttpError(f"not a header line: {line[:60]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return status, headers


class Pool:
    """Keep-alive connections, at most `limit` open at once, as the module says."""

    def __init__(self, limit: int = POOL_LIMIT, idle_seconds: float = IDLE_SECONDS) -> None:
        self._limit = limit
        self._idle_seconds = idle_seconds
        self._idle: dict[Key, list[_Connection]] = {}  # the most recently used last
        self._open = 0  # connected, connecting, in use or idle
        # Requests waiting for a connection, first come first served: each is handed a
        # connection to its server, or None: a slot to open one in.
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def open_connections(self) -> int:
        return self._open

    async def fetch(
        self,
        method: str,
        origin: Origin,
        target: str,
        headers: dict[str, str],
        body: bytes | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        read: Callable[[Response], Awaitable[bytes]] | None = None,
        total: float = TOTAL_TIMEOUT,
    ) -> tuple[int, bytes]:
        """One request and its whole answer (or what `read` makes of it), within
        `total` seconds in all (the wait for a connection too)."""
        async with asyncio.timeout(total):
            response = await self.open(
                method, origin, target, headers, body, tls=tls, server_hostname=server_hostname
            )
            try:
                payload = await (read(response) if read else response.read())
            finally:
                response.release()
        return response.status, payload

    async def open(
        self,
        method: str,
        origin: Origin,
        target: str,
        headers: dict[str, str],
        body: bytes | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> Response:
        """Send a request; its answer once its head is in (the body is the caller's to
        read, then `release`). `read_timeout`: seconds of silence allowed at each read
        from then on, and for the head; `connect_timeout` bounds opening a connection."""
        if tls is not None and not origin.tls:
            tls = None
        key: Key = (origin.host, origin.port, tls, server_hostname if tls else None)
        request = _request(method, origin, target, headers, body)
        fresh = False
        while True:
            connection, reused = await self._acquire(key, fresh, connect_timeout)
            connection.read_timeout = read_timeout
            try:
                connection.send(request)
                head = await connection.read_until(b"\r\n\r\n", HEAD_LIMIT)
                status, answer = _head(head)
                while 100 <= status < 200 and status != 101:  # informational: the next
                    status, answer = _head(await connection.read_until(b"\r\n\r\n", HEAD_LIMIT))
            except (OSError, HttpError) as error:
                self.release(connection, reusable=False)
                if not fresh and _replayable(method, reused, connection, error):
                    fresh = True  # once more (once), on a new connection if one can open
                    continue
                raise
            except BaseException:
                self.release(connection, reusable=False)
                raise
            response = Response(self, connection, status, answer)
            if method == "HEAD" or status in (204, 304):
                response._done = True
            return response

    def release(self, connection: _Connection, *, reusable: bool) -> None:
        """A connection no request uses any more: handed to the first request waiting
        for its server, else kept idle for the next; or closed (its slot handed on)."""
        connection.read_timeout = None
        if reusable and not self._closed and connection.usable:
            if self._hand_over(connection):
                return
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.setdefault(connection.key, []).append(connection)
            self._sweep_later()
        else:
            connection.close()
            self._slot_freed()

    async def close(self) -> None:
        """Close every idle connection; those in use close when released."""
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
                self._open -= 1
        self._idle.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
        await asyncio.sleep(0)  # let the transports finish closing

    # -- internals --------------------------------------------------------------------

    async def _acquire(
        self, key: Key, fresh: bool, connect_timeout: float | None
    ) -> tuple[_Connection, bool]:
        """An idle connection to `key` (reused: True), else a new one once fewer than
        `limit` are open (an idle one to another server is closed to make room)."""
        if not fresh and (connection := self._take_idle(key)) is not None:
            return connection, True
        if self._open < self._limit or self._close_an_idle():
            self._open += 1
        elif (given := await self._wait_turn(key)) is not None:
            return given, True
        try:  # in a slot of its own
            return await self._connect(key, connect_timeout), False
        except BaseException:
            self._slot_freed()
            raise

    def _take_idle(self, key: Key) -> _Connection | None:
        """The most recently used idle connection to `key` still open (and not idle
        too long: the sweeper may not have come by yet)."""
        connections = self._idle.get(key)
        if not connections:
            return None
        oldest = asyncio.get_running_loop().time() - self._idle_seconds
        while connections:
            connection = connections.pop()
            if connection.usable and connection.idle_since > oldest:
                return connection
            connection.close()  # the server closed it while idle, or it idled too long
            self._open -= 1
        return None

    def _close_an_idle(self) -> bool:
        """Close the longest-idle connection to make room; False if none is idle."""
        oldest: _Connection | None = None
        for connections in self._idle.values():
            if connections and (oldest is None or connections[0].idle_since < oldest.idle_since):
                oldest = connections[0]
        if oldest is None:
            return False
        self._idle[oldest.key].remove(oldest)
        oldest.close()
        self._open -= 1
        return True

    async def _connect(self, key: Key, connect_timeout: float | None) -> _Connection:
        host, port, tls, server_hostname = key
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(connect_timeout):
            _, connection = await loop.create_connection(
                lambda: _Connection(key), host, port, ssl=tls, server_hostname=server_hostname
            )
        return connection

    async def _wait_turn(self, key: Key) -> _Connection | None:
        """Wait behind the requests that came first: a connection to `key`, or None
        (a slot to open one in)."""
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append((key, waiter))
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed one it will not use
                given = waiter.result()
                if given is None:
                    self._slot_freed()
                else:
                    self.release(given, reusable=True)
            raise

    def _hand_over(self, connection: _Connection) -> bool:
        """To the first request waiting for its server; if only requests for other
        servers wait, it is closed and the first of them gets its slot."""
        waiters = self._waiters
        while waiters and waiters[0][1].done():
            waiters.popleft()  # cancelled
        if not waiters:
            return False
        for index, (key, waiter) in enumerate(waiters):
            if key == connection.key and not waiter.done():
                del waiters[index]
                waiter.set_result(connection)
                return True
        connection.close()
        waiters.popleft()[1].set_result(None)
        return True

    def _slot_freed(self) -> None:
        """A connection closed: the first waiting request may open one instead."""
        while self._waiters:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot is its now: `_open` unchanged
                return
        self._open -= 1

    def _sweep_later(self) -> None:
        if self._sweeper is None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_later(self._idle_seconds / 2, self._sweep)

    def _sweep(self) -> None:
        """Close the connections idle for longer than `idle_seconds`; again later if
        any is left idle (one timer for the pool, none per request)."""
        self._sweeper = None
        deadline = asyncio.get_running_loop().time() - self._idle_seconds
        for key, connections in list(self._idle.items()):
            keep = [one for one in connections if one.idle_since > deadline and one.usable]
            for one in connections:
                if one not in keep:
                    one.close()
                    self._slot_freed()
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        if self._idle:
            self._sweep_later()


def _replayable(method: str, reused: bool, connection: _Connection, error: Exception) -> bool:
    """A read that got nothing back on a connection that had served before: most
    likely the server closed it just as the request went (Go's transport asks the
    same). Not a timeout: that is the caller's to see."""
    return (
        reused
        and connection.received == 0
        and method in ("GET", "HEAD")
        and not isinstance(error, TimeoutError)
    )


def _request(
    method: str, origin: Origin, target: str, headers: dict[str, str], body: bytes | None
) -> bytes:
    """The request's bytes, head and body, for one write."""
    lines = [f"{method} {origin.prefix}{target} HTTP/1.1\r\nHost: {origin.host_header}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in headers.items())
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body) if body else 0}\r\n")
    lines.append("\r\n")
    head = "".join(lines).encode("latin-1")
    return head + body if body else head
