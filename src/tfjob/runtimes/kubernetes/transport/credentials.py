"""Who the operator is to the API server, kept current while it runs.

`kubeconfig.py` reads the credentials; this module turns a reading into what each
request carries (`Auth`: the Authorization header, and a TLS context presenting the
client certificate) and reads again, in this process, when they may have changed:
a file they came from changed (a stat at most every FILE_CHECK seconds), an exec
credential is about to expire, or the API server answered 401 (the exec plugin then
runs again too). A new `Auth` brings a new `ssl.SSLContext`, so connections made from
then on present the new certificate (http1.py pools connections per context).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path

from tfjob.runtimes.kubernetes.transport import kubeconfig
from tfjob.runtimes.kubernetes.transport.kubeconfig import (
    SERVICE_ACCOUNT,
    CredentialsError,
    ExecAnswer,
    Found,
    Source,
)

__all__ = ["SERVICE_ACCOUNT", "Auth", "Connection", "Credentials", "CredentialsError", "connection"]

FILE_CHECK = 5.0  # seconds between looks at the files the credentials came from
RELOAD_SPACING = 10.0  # seconds: a 401 this soon after a reload that changed nothing starts none
EXPIRY_AHEAD = 10.0  # seconds before an exec credential expires that it is renewed (at most)
EXEC_MIN_LIFE = 1.0  # seconds an exec credential is used at least, however short it says it lives

Signature = tuple[int, int, int] | None  # a file's (inode, size, mtime), None: missing
# What a request carries from a reading: a change makes a new Auth.
_carried = attrgetter("authorization", "certificate", "key", "ca", "verify", "tls_server_name")


@dataclass(frozen=True, eq=False)
class Auth:
    """What a request carries; a new one after each reading that changed anything."""

    authorization: str | None
    tls: ssl.SSLContext | None  # None: a plain-HTTP server (no TLS)
    server_hostname: str | None = None  # tls-server-name
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Connection:
    server: str
    credentials: Credentials
    namespace: str = "default"  # the context's namespace, for commands given none


class Credentials:
    """The current `Auth`, read again as the module docstring says."""

    def __init__(self, source: Source, found: Found) -> None:
        self._source, self._found, self._auth = source, found, _auth(found)
        self._reloading = asyncio.Lock()
        self._reloaded_at = -RELOAD_SPACING
        self._signatures = _signatures(found.files)
        self._checked_at = time.monotonic()

    async def auth(self) -> Auth:
        """The Auth for a request, read again first if a file changed or an exec
        credential is about to expire; if that fails, the last (a 401 will say why)."""
        if self._expiring() or self._files_changed():
            current = self._auth
            async with self._reloading:
                if self._auth is current and (self._expiring() or self._files_changed(now=True)):
                    await self._reload(after_401=False)
        return self._auth

    async def header(self) -> str | None:
        return (await self.auth()).authorization

    async def refresh(self, sent: Auth | None = None) -> bool:
        """After a 401 to a request that carried `sent` (default: the current Auth):
        read everything again, the exec plugin too; True if the credentials changed
        (worth a retry). 401s in flight together share one reading, however late each
        answer comes back; one soon after a reading that changed nothing starts none
        (its request fails)."""
        current = self._auth if sent is None else sent
        async with self._reloading:
            if self._auth is not current:  # read again for another request meanwhile
                return True
            if time.monotonic() - self._reloaded_at < RELOAD_SPACING:
                return False
            await self._reload(after_401=True)
        return self._auth is not current

    def _expiring(self) -> bool:
        answer = self._found.exec_answer
        return answer is not None and time.time() >= _renew_at(answer)

    def _files_changed(self, *, now: bool = False) -> bool:
        if not now and time.monotonic() - self._checked_at < FILE_CHECK:
            return False
        self._checked_at = time.monotonic()
        return _signatures(self._found.files) != self._signatures

    async def _reload(self, *, after_401: bool) -> None:
        """Read again (in a thread: an exec plugin may take a while); a new Auth if
        anything a request carries changed. After a 401 the exec plugin runs again and
        a failure raises; otherwise a failure keeps the last credentials."""
        last = self._found.exec_answer
        reuse = None if after_401 or self._expiring() else last
        # Taken before reading: a change made while reading shows at the next look.
        before = _signatures(self._found.files)
        if after_401:
            self._reloaded_at = time.monotonic()
        try:
            found = await asyncio.to_thread(kubeconfig.read, self._source, reuse)
            auth = _auth(found) if _carried(found) != _carried(self._found) else self._auth
        except CredentialsError:
            self._signatures = before
            if last is not None and self._expiring():
                # Renewed RELOAD_SPACING from now at the earliest, rather than a failing
                # plugin run on every request.
                later = replace(last, obtained=time.time() + RELOAD_SPACING - EXEC_MIN_LIFE)
                self._found = replace(self._found, exec_answer=later)
            if after_401:
                raise
            return
        known = dict(zip(self._found.files, before, strict=True))
        self._signatures = tuple(
            known[one] if one in known else _signature(one) for one in found.files
        )
        self._found, self._auth = found, auth


def connection(
    kubeconfig_path: str | None,
    context: str | None = None,
    *,
    service_account: Path = SERVICE_ACCOUNT,
) -> Connection:
    """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG (else
    ~/.kube/config); `context` picks one of the kubeconfig's contexts instead of its
    current one. An exec plugin runs here; this blocks until it is done, whether or not
    the caller runs an event loop."""
    source = kubeconfig.choose(kubeconfig_path, context, service_account)
    found = kubeconfig.read(source)
    return Connection(
        server=found.server, credentials=Credentials(source, found), namespace=found.namespace
    )


def _renew_at(answer: ExecAnswer) -> float:
    """When an exec credential is renewed: a little before it expires (a quarter of
    its life when that is shorter than EXPIRY_AHEAD), never sooner than EXEC_MIN_LIFE
    after it was obtained."""
    if answer.expires is None:
        return float("inf")
    life = answer.expires - answer.obtained
    ahead = min(EXPIRY_AHEAD, max(life, 0.0) / 4)
    return max(answer.expires - ahead, answer.obtained + EXEC_MIN_LIFE)


def _auth(found: Found) -> Auth:
    headers = {"Authorization": found.authorization} if found.authorization else {}
    # Every https server gets a context of ours (the system's CAs when the kubeconfig
    # names none).
    tls = _tls(found) if found.server.startswith("https") else None
    return Auth(found.authorization, tls, found.tls_server_name, headers)


def _tls(found: Found) -> ssl.SSLContext:
    """The server's CA, the client certificate if any, and verification as the
    kubeconfig asks (insecure-skip-tls-verify turns it off, nothing else does)."""
    try:
        if found.verify:
            tls = ssl.create_default_context(cadata=found.ca)  # None: the system's CAs
        else:  # no CA is loaded for a server that is not verified
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ssl.SSLError as error:
        raise CredentialsError(f"the CA of {found.who} cannot be used: {error}") from None
    if found.certificate:
        try:
            _load_client_certificate(tls, found.certificate, found.key)
        except ssl.SSLError as error:
            raise CredentialsError(
                f"the client certificate and key of {found.who} cannot be used"
                f" (not PEM, or a key of another certificate): {error}"
            ) from None
    if not found.verify:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    return tls


def _load_client_certificate(tls: ssl.SSLContext, certificate: str, key: str | None) -> None:
    """ssl loads a certificate and key only from a file: one readable by us alone
    (mkstemp makes it 0600), removed as soon as it is loaded."""
    handle, path = tempfile.mkstemp(prefix="tfjob-client-", suffix=".pem")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(certificate if key is None else certificate.rstrip("\n") + "\n" + key)
        tls.load_cert_chain(path)
    finally:
        os.unlink(path)


def _signature(path: Path) -> Signature:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _signatures(files: tuple[Path, ...]) -> tuple[Signature, ...]:
    return tuple(_signature(one) for one in files)
