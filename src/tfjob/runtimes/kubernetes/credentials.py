"""Who the operator is to the API server: kubeconfig or in-cluster credentials.

kubernetes_asyncio's config loader reads the kubeconfig or the service account:
contexts, client certificates, bearer tokens, token files, basic auth and exec plugins
(client.authentication.k8s.io). It runs in a short-lived child process
(`kubeconfig_child.py`) because importing it imports the library's whole generated
client, ~30 MB the operator would hold for its whole life. This module builds the TLS
context from the PEM data the child sends back and hands our client the Authorization
header. A 401 runs the child again - the token file re-read, the exec plugin re-run -
and in-cluster the service-account token file is re-read here once a minute as the
kubelet rotates it. Why this library and why a child: docs/decisions/, record 0004.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tfjob.api.errors import PermanentError
from tfjob.runtimes.kubernetes import kubeconfig_child
from tfjob.runtimes.kubernetes.kubeconfig_child import Answer, Failed, Found

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD = 60.0  # seconds: how often the in-cluster token file is read again
RELOAD_SPACING = 10.0  # seconds: 401s within this of a reload do not start another child

Loader = Callable[[], Found]  # runs the child again: what the credentials are now


class CredentialsError(PermanentError):
    """The kubeconfig names credentials that cannot be used."""


@dataclass(frozen=True)
class Connection:
    server: str
    tls: ssl.SSLContext | None
    credentials: Credentials
    namespace: str = "default"  # the context's namespace, for commands given none


class Credentials:
    """The Authorization header for each request, loaded again after a 401."""

    def __init__(self, found: Found, load: Loader) -> None:
        self._load = load
        self._use(found)
        self._reloading = asyncio.Lock()
        self._reloaded_at = -RELOAD_SPACING

    def _use(self, found: Found) -> None:
        self._authorization = found.authorization
        self._token_file = Path(found.token_file) if found.token_file else None
        self._read_at = time.monotonic()

    async def header(self) -> str | None:
        if self._token_file is not None and time.monotonic() - self._read_at >= TOKEN_REREAD:
            self._read_token_file(self._token_file)
        return self._authorization

    def _read_token_file(self, path: Path) -> None:
        """In-cluster: the kubelet rotates the token in place; a file that cannot be
        read now keeps the last token (a 401 then runs the child, which says why)."""
        self._read_at = time.monotonic()
        try:
            token = path.read_text().strip()
        except OSError:
            return
        if token:
            self._authorization = f"Bearer {token}"

    async def refresh(self) -> bool:
        """After a 401: load again; True if the header changed (worth a retry).

        A reload is a child process (~0.4 s of CPU, ~40 MB while it runs), so the 401s
        of requests in flight together share one, and a 401 soon after a reload that
        changed nothing does not start another."""
        old = await self.header()
        async with self._reloading:
            current = await self.header()
            if current != old:  # reloaded for another request meanwhile
                return current is not None
            if time.monotonic() - self._reloaded_at < RELOAD_SPACING:
                return False
            try:
                self._use(await asyncio.to_thread(self._load))
            finally:
                self._reloaded_at = time.monotonic()
        new = await self.header()
        return new is not None and new != old


def connection(
    kubeconfig: str | None,
    context: str | None = None,
    *,
    service_account: Path = SERVICE_ACCOUNT,
) -> Connection:
    """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG (else
    ~/.kube/config); `context` picks one of the kubeconfig's contexts instead of its
    current one. Exec plugins run here once, in the child (or in the one `read_ahead`
    started with the same arguments); this blocks until it is done, whether or not the
    caller runs an event loop."""
    key = (kubeconfig, context, service_account)

    def load() -> Found:
        return _Child(*key).answer()

    early = _READ_AHEAD.pop(key, None)
    found = early.answer() if early is not None else load()
    return Connection(
        server=found.server,
        tls=_tls(found) if found.server.startswith("https") else None,
        credentials=Credentials(found, load),
        namespace=found.namespace,
    )


def read_ahead(
    kubeconfig: str | None,
    context: str | None = None,
    *,
    service_account: Path = SERVICE_ACCOUNT,
) -> None:
    """Start the child now, for the next `connection()` with the same arguments: the
    operator calls this before importing its modules, so the child's start (~0.4 s,
    mostly imports) can run beside that work instead of after it. A child
    that cannot start is left to `connection()` to report."""
    key = (kubeconfig, context, service_account)
    if key not in _READ_AHEAD:
        if not _READ_AHEAD:
            atexit.register(_end_unclaimed)
        with contextlib.suppress(CredentialsError):
            _READ_AHEAD[key] = _Child(*key)


def _end_unclaimed() -> None:
    """At exit (bad flags, say): a child no connection() asked for does not outlive us."""
    while _READ_AHEAD:
        _READ_AHEAD.popitem()[1].end()


class _Child:
    """One run of kubeconfig_child.py in a fresh interpreter, its answer read from a
    pipe of its own: its stdout and stderr stay the caller's (an exec plugin sees the
    same terminal). Run by path with -P, so it imports no tfjob module (whichever tfjob
    is installed) and nothing from the current directory."""

    def __init__(self, kubeconfig: str | None, context: str | None, service_account: Path):
        command = [sys.executable, "-P", kubeconfig_child.__file__]
        command += ["--service-account", str(service_account)]
        if kubeconfig is not None:
            command += ["--kubeconfig", kubeconfig]
        if context is not None:
            command += ["--context", context]
        read, write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [*command, "--answer-fd", str(write)], pass_fds=(write,)
            )
        except OSError as error:
            os.close(read)
            message = f"cannot start {sys.executable} to read the kubeconfig: {error}"
            raise CredentialsError(message) from None
        finally:
            os.close(write)
        self._read = read

    def end(self) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._read)

    def answer(self) -> Found:
        with os.fdopen(self._read, "rb") as pipe:
            data = pipe.read()
        code = self._process.wait()
        try:
            answer: Answer = msgspec.json.decode(data, type=Answer)
        except msgspec.DecodeError:
            raise CredentialsError(f"reading the kubeconfig failed (exit status {code})") from None
        if isinstance(answer, Failed):
            raise CredentialsError(answer.error)
        return answer


# Children started by read_ahead, each answering one connection() with its arguments.
_READ_AHEAD: dict[tuple[str | None, str | None, Path], _Child] = {}


def _tls(found: Found) -> ssl.SSLContext:
    """The server's CA, the client certificate if any, and verification as the
    kubeconfig asks (insecure-skip-tls-verify turns it off, nothing else does)."""
    tls = ssl.create_default_context(cadata=found.ca)  # None: the system's CAs
    if found.certificate:
        _load_client_certificate(tls, found.certificate, found.key)
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
