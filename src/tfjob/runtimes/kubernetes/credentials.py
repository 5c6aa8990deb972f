"""Who the operator is to the API server: kubeconfig or in-cluster credentials.

lightkube reads the kubeconfig (or the service account) and builds the TLS context -
server CA and client certificates included; this module turns its `User` into the
Authorization header for our aiohttp transport (lightkube's own auth classes are
httpx-specific). Supported, as lightkube: a bearer token, a token file (re-read when
the API server answers 401, as the kubelet rotates service-account tokens), basic
auth, and exec plugins (client.authentication.k8s.io, re-run on 401).
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from tfjob.api.errors import PermanentError

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1")


class CredentialsError(PermanentError):
    """The kubeconfig names credentials that cannot be used."""


@dataclass(frozen=True)
class Connection:
    server: str
    tls: ssl.SSLContext | None
    credentials: Credentials
    namespace: str = "default"  # the context's namespace, for commands given none


class Credentials:
    """The Authorization header for each request, refreshed after a 401."""

    def __init__(self, user: Any) -> None:
        self._user = user
        self._header: str | None = None

    async def header(self) -> str | None:
        if self._header is None:
            self._header = await self._load()
        return self._header

    async def refresh(self) -> bool:
        """After a 401: load again; True if the header changed (worth a retry)."""
        old = self._header
        self._header = await self._load()
        return self._header is not None and self._header != old

    async def _load(self) -> str | None:
        user = self._user
        if user is None:
            return None
        if user.token_file:
            token = await asyncio.to_thread(Path(user.token_file).read_text)
            return "Bearer " + token.strip()
        if user.token:
            return "Bearer " + str(user.token).strip()
        if user.exec is not None:
            return "Bearer " + await _exec_token(user.exec)
        if user.username and user.password:
            pair = f"{user.username}:{user.password}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        if user.auth_provider:
            raise CredentialsError("kubeconfig auth-provider plugins are not supported")
        return None


async def _exec_token(spec: Any) -> str:
    if spec.apiVersion not in EXEC_API_VERSIONS and not spec.apiVersion.endswith("v1alpha1"):
        raise CredentialsError(f"exec plugin apiVersion {spec.apiVersion} is not supported")
    env = dict(os.environ)
    env.update({item.name: item.value for item in spec.env or []})
    process = await asyncio.create_subprocess_exec(
        spec.command,
        *(spec.args or []),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise CredentialsError(f"exec plugin {spec.command} failed: {err.decode()[:500]}")
    token = msgspec.json.decode(out).get("status", {}).get("token")
    if not token:
        raise CredentialsError(f"exec plugin {spec.command} returned no token")
    return str(token)


def connection(kubeconfig: str | None, context: str | None = None) -> Connection:
    """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG; `context`
    picks one of the kubeconfig's contexts instead of its current one."""
    from lightkube.config import client_adapter
    from lightkube.config.kubeconfig import KubeConfig

    config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    single = config.get(context)
    if single is None:
        raise CredentialsError("the kubeconfig has no current context")
    server = single.cluster.server
    tls = None
    if server.startswith("https"):
        user = single.user if single.user is not None else _no_user()
        tls = client_adapter.verify_cluster(single.cluster, user, single.abs_file)
    return Connection(
        server=server, tls=tls, credentials=Credentials(single.user), namespace=single.namespace
    )


def _no_user() -> Any:
    from lightkube.config.models import User

    return User()
