"""Who the operator is to the API server: kubeconfig or in-cluster credentials.

kubernetes_asyncio's config loader (aiohttp-based, the same HTTP stack as our client)
reads the kubeconfig or the service account: contexts, client certificates, bearer
tokens, token files, basic auth and exec plugins (client.authentication.k8s.io). This
module only builds the TLS context from what it found and hands our client the
Authorization header. A 401 loads the credentials again - the token file re-read, the
exec plugin re-run - and in-cluster the service-account token is re-read once a minute
as the kubelet rotates it. Why this library: docs/kubernetes-runtime.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfjob.api.errors import PermanentError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"

# The loader logs what it then raises (or a missing file it then skips): our errors say
# it once. Its records still reach the handlers the operator configures.
logging.getLogger("kubernetes_asyncio").addHandler(logging.NullHandler())

Loader = Callable[[], Awaitable[Any]]  # -> a loaded kubernetes_asyncio Configuration


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

    def __init__(self, config: Any, load: Loader) -> None:
        self._config = config  # kubernetes_asyncio.client.Configuration
        self._load = load

    async def header(self) -> str | None:
        # Runs the loader's refresh hook (in-cluster: re-reads a rotated token file).
        value = await self._config.get_api_key_with_prefix("BearerToken")
        return str(value).strip() if value else None

    async def refresh(self) -> bool:
        """After a 401: load again; True if the header changed (worth a retry)."""
        old = await self.header()
        self._config = await self._load()
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
    current one. Exec plugins run here once, off the caller's event loop."""
    from kubernetes_asyncio.config import ConfigException

    try:
        if kubeconfig is None and _in_cluster(service_account):
            return _in_cluster_connection(service_account)
        path = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        return _kubeconfig_connection(os.path.expanduser(path), context)
    except ConfigException as error:
        raise CredentialsError(str(error)) from None


def _in_cluster(service_account: Path) -> bool:
    return (service_account / "token").is_file() and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _in_cluster_connection(service_account: Path) -> Connection:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

    def load() -> Any:
        config = Configuration()
        loader = InClusterConfigLoader(
            token_filename=str(service_account / "token"),
            cert_filename=str(service_account / "ca.crt"),
        )
        loader.load_and_set(config)  # sets a hook re-reading the token every minute
        return config

    async def reload() -> Any:
        return await asyncio.to_thread(load)

    config = load()
    namespace_file = service_account / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else ""
    return Connection(
        server=config.host,
        tls=_tls(config),
        credentials=Credentials(config, reload),
        namespace=namespace or "default",
    )


def _kubeconfig_connection(path: str, context: str | None) -> Connection:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

    if not any(os.path.isfile(os.path.expanduser(one)) for one in path.split(os.pathsep)):
        raise CredentialsError(f"{path}: no such file")
    merged = KubeConfigMerger(path).config
    if merged is None or not merged.safe_get("contexts"):
        raise CredentialsError(f"{path}: the kubeconfig has no contexts")
    if context is None and not merged.safe_get("current-context"):
        raise CredentialsError(f"{path}: the kubeconfig has no current context")
    chosen = merged["contexts"].get_with_name(context or merged["current-context"])
    if chosen is None:  # get_with_name raises for a missing name; kept for safety
        raise CredentialsError(f"{path}: no context {context}")

    async def load() -> Any:
        config = Configuration()
        loader = KubeConfigLoader(config_dict=merged, active_context=context, config_base_path=None)
        await loader.load_and_set(config)
        return config

    config = _run_now(load())
    return Connection(
        server=config.host,
        tls=_tls(config) if config.host.startswith("https") else None,
        credentials=Credentials(config, load),
        namespace=str(chosen["context"].safe_get("namespace") or "default"),
    )


def _tls(config: Any) -> ssl.SSLContext:
    """The server's CA, the client certificate if any, and verification as the
    kubeconfig asks (insecure-skip-tls-verify turns it off, nothing else does)."""
    tls = ssl.create_default_context(cafile=config.ssl_ca_cert)
    if config.cert_file:
        tls.load_cert_chain(config.cert_file, keyfile=config.key_file)
    if not config.verify_ssl:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    return tls


def _run_now(work: Coroutine[Any, Any, Any]) -> Any:
    """Run `work` to completion on an event loop of its own, in a thread of its own,
    so this works whether or not the caller already runs a loop."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(work)
        except BaseException as error:  # re-raised in the caller's thread
            result["error"] = error

    thread = threading.Thread(target=target, name="kubeconfig")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
