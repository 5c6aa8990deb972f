"""aiohttp, with asyncio's TLS connections reading 64 KB at a time.

asyncio's TLS transport (`asyncio.sslproto.SSLProtocol`) keeps a read buffer of
`max_size` (256 KB) per connection, zero-filled, and asks OpenSSL for up to that much
at each read (a 256 KB allocation each, cut to what came): with the operator's ten
or so connections, 2.5 MB held, and the biggest allocations of its hot path. The API
server's answers and watch events are a few KB; a 64 KB buffer reads them in one go
(a list of thousands of objects comes in more reads of 64 KB).

The operator's process imports aiohttp first through `lean_aiohttp` (its default
TLS contexts left without CAs); any other process gets aiohttp as it is.
"""

from __future__ import annotations

import asyncio.sslproto

#: Bytes asyncio's TLS transport reads at once (its own default: 256 KB).
TLS_READ_SIZE = 64 * 1024


def _smaller_tls_reads() -> None:
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and getattr(protocol, "max_size", 0) > TLS_READ_SIZE:
        setattr(protocol, "max_size", TLS_READ_SIZE)  # noqa: B010


_smaller_tls_reads()

import aiohttp  # noqa: E402

__all__ = ["aiohttp"]
