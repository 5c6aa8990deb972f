"""aiohttp imported, in the operator's process only, without the TLS contexts it
would make for requests given none.

aiohttp's connector module builds two `ssl.SSLContext`s when it is imported (a
verifying one with the system's CAs loaded, and a non-verifying one), for requests
that pass no context of their own: some 2 MB of the operator's memory and 40 ms or
more of its start. Every request the operator makes passes its own (credentials.py
makes one for each https server, with the system's CAs only when the kubeconfig
names none), so the system's CA bundle is not loaded for them: while aiohttp is
first imported, `ssl.create_default_context` and `SSLContext.set_default_verify_paths`
make and leave a context with no CA at all (one that verifies nothing it is given,
so a request that used it would fail, never pass unchecked). Once imported, both
are ssl's own again. Only `tfjob operator` calls this, before anything imports
aiohttp: the CLI and a program using tfjob's client keep aiohttp's defaults for
their own requests.
"""

from __future__ import annotations

import ssl
import sys
from typing import Any


def import_aiohttp_without_default_contexts() -> None:
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
