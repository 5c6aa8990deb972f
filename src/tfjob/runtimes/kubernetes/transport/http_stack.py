"""aiohttp, imported without the TLS contexts it would make for requests given none;
asyncio's TLS connections reading 64 KB at a time.

aiohttp's connector module builds two `ssl.SSLContext`s when it is imported (a
verifying one with the system's CAs loaded, and a non-verifying one), for requests
that pass no context of their own: some 2 MB of the operator's memory and 40 ms or
more of its start. Every request of ours passes its own (credentials.py makes one
for each https server, with the system's CAs only when the kubeconfig names no CA),
so the system's CA bundle is not loaded for them: while aiohttp is first imported,
`ssl.create_default_context` and `SSLContext.set_default_verify_paths` make and
leave a context with no CA at all (one that verifies nothing it is given, so a
request that used it would fail, never pass unchecked). Once imported, both are
ssl's own again.

asyncio's TLS transport (`asyncio.sslproto.SSLProtocol`) keeps a read buffer of
`max_size` (256 KB) per connection, zero-filled, and asks OpenSSL for up to that much
at each read (a 256 KB allocation each, cut to what came): with the operator's ten
or so connections, 2.5 MB held, and the biggest allocations of its hot path. The API
server's answers and watch events are a few KB; a 64 KB buffer reads them in one go
(a list of thousands of objects comes in more reads of 64 KB).
"""

from __future__ import annotations

import asyncio.sslproto
import ssl
import sys
from typing import Any


def _import_aiohttp() -> None:
    if "aiohttp" in sys.modules:
        return
    create = ssl.create_default_context

    def bare_context(*_args: Any, **_kwargs: Any) -> ssl.SSLContext:
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    def no_default_paths(_self: ssl.SSLContext) -> None:
        return None

    setattr(ssl, "create_default_context", bare_context)  # noqa: B010
    setattr(ssl.SSLContext, "set_default_verify_paths", no_default_paths)  # noqa: B010
    try:
        import aiohttp  # noqa: F401
    finally:
        setattr(ssl, "create_default_context", create)  # noqa: B010
        delattr(ssl.SSLContext, "set_default_verify_paths")  # _ssl._SSLContext's again


#: Bytes asyncio's TLS transport reads at once (its own default: 256 KB).
TLS_READ_SIZE = 64 * 1024


def _smaller_tls_reads() -> None:
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and getattr(protocol, "max_size", 0) > TLS_READ_SIZE:
        setattr(protocol, "max_size", TLS_READ_SIZE)  # noqa: B010


_import_aiohttp()
_smaller_tls_reads()

import aiohttp  # noqa: E402

__all__ = ["aiohttp"]
