"""Read the kubeconfig or the service account with kubernetes_asyncio, in a child process.

kubernetes_asyncio's package imports its whole generated client (768 model modules,
~30 MB that stay for the life of the process) even when only its config loader is
wanted. The operator and the cluster commands need only what the loader found, so
`credentials.py` runs this file in a fresh interpreter (`python -P kubeconfig_child.py`):
the library reads the kubeconfig (or the service account) and authenticates - token,
token file, basic auth, exec plugin - here, and one JSON document goes back on the file
descriptor the parent gave; the parent never imports the library. The library writes
inline certificate data to temporary files it deletes when this process exits, so the
answer carries file contents, not paths. The child imports the loader without the
generated client (`import_loader_alone`): its start is what the operator waits for. This
module imports only msgspec and the standard library at the top, so the parent can
import it for the answer's types.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import sys
import types
from pathlib import Path
from typing import Any

import msgspec

DEFAULT_KUBECONFIG = "~/.kube/config"


class Found(msgspec.Struct, tag="found", frozen=True):
    """What the loader found: enough for a TLS context and an Authorization header."""

    server: str
    namespace: str = "default"  # the context's namespace (in-cluster: the pod's)
    ca: str | None = None  # PEM of the server's CA; None: the system's CAs
    certificate: str | None = None  # PEM of the client certificate (chain)
    key: str | None = None  # PEM of its key; None: the key is in `certificate`
    authorization: str | None = None  # the header's value: "Bearer ...", "Basic ..."
    verify: bool = True  # False only for insecure-skip-tls-verify
    token_file: str | None = None  # in-cluster: the token, re-read as the kubelet rotates it


class Failed(msgspec.Struct, tag="failed", frozen=True):
    error: str


Answer = Found | Failed


def load(kubeconfig: str | None, context: str | None, service_account: Path) -> Answer:
    """From a kubeconfig file, else in-cluster credentials, else $KUBECONFIG (else
    ~/.kube/config); `context` picks one of the kubeconfig's contexts instead of its
    current one. A kubeconfig that cannot be used is a `Failed` answer saying why: the
    error never leaves this process, so it is the loader's own ConfigException here."""
    from kubernetes_asyncio.config import ConfigException

    try:
        if kubeconfig is None and _in_cluster(service_account):
            return _in_cluster_found(service_account)
        path = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        return _kubeconfig_found(os.path.expanduser(path), context)
    except ConfigException as error:
        return Failed(str(error))


def _in_cluster(service_account: Path) -> bool:
    return (service_account / "token").is_file() and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _in_cluster_found(service_account: Path) -> Found:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

    config = Configuration()
    token_file = service_account / "token"
    loader = InClusterConfigLoader(
        token_filename=str(token_file), cert_filename=str(service_account / "ca.crt")
    )
    loader.load_and_set(config)
    namespace_file = service_account / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else ""
    return Found(
        server=str(config.host),
        namespace=namespace or "default",
        ca=_read(config.ssl_ca_cert),
        authorization=asyncio.run(_authorization(config)),
        token_file=str(token_file),
    )


def _kubeconfig_found(path: str, context: str | None) -> Found:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import ConfigException
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

    if not any(os.path.isfile(os.path.expanduser(one)) for one in path.split(os.pathsep)):
        raise ConfigException(f"{path}: no such file")
    merged = KubeConfigMerger(path).config
    if merged is None or not merged.safe_get("contexts"):
        raise ConfigException(f"{path}: the kubeconfig has no contexts")
    if context is None and not merged.safe_get("current-context"):
        raise ConfigException(f"{path}: the kubeconfig has no current context")
    chosen = merged["contexts"].get_with_name(context or merged["current-context"])
    if chosen is None:  # get_with_name raises for a missing name; kept for safety
        raise ConfigException(f"{path}: no context {context}")
    config = Configuration()
    loader = KubeConfigLoader(config_dict=merged, active_context=context, config_base_path=None)
    authorization = asyncio.run(_load_and_set(loader, config))
    server = str(config.host)
    https = server.startswith("https")
    return Found(
        server=server,
        namespace=str(chosen["context"].safe_get("namespace") or "default"),
        ca=_read(config.ssl_ca_cert) if https else None,
        certificate=_read(config.cert_file) if https else None,
        key=_read(config.key_file) if https else None,
        authorization=authorization,
        verify=bool(config.verify_ssl),
    )


async def _load_and_set(loader: Any, config: Any) -> str | None:
    await loader.load_and_set(config)  # exec plugins run here
    return await _authorization(config)


async def _authorization(config: Any) -> str | None:
    value = await config.get_api_key_with_prefix("BearerToken")
    return str(value).strip() if value else None


def _read(path: str | None) -> str | None:
    return Path(path).read_text() if path else None


def explain(error: Exception, kubeconfig: str | None) -> str:
    """One line for an error the loader raised reading a file that is not a kubeconfig."""
    where = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    if isinstance(error, KeyError):
        return f"{where}: it has no {error} entry"
    if isinstance(error, (TypeError, AttributeError)):
        return f"{where}: it is not shaped as a kubeconfig ({error})"
    text = " ".join(str(error).split())
    return text or type(error).__name__


def answer(kubeconfig: str | None, context: str | None, service_account: Path) -> Answer:
    # The loader logs what it then raises (or a missing file it then skips): the
    # answer says it once.
    logging.getLogger("kubernetes_asyncio").addHandler(logging.NullHandler())
    try:
        return load(kubeconfig, context, service_account)
    except Exception as error:  # a malformed file: its YAML, a missing entry, a bad path
        return Failed(explain(error, kubeconfig))


# The packages whose __init__ imports the generated client: every API and model class.
GENERATED = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


class _Deferred(types.ModuleType):
    """A package entered without running its __init__. Its submodules import as usual;
    any other name imports the real package then and is taken from there."""

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name)
        self.__path__ = [str(folder)]
        self._folder = folder

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if (self._folder / f"{attribute}.py").is_file() or (self._folder / attribute).is_dir():
            return importlib.import_module(f"{self.__name__}.{attribute}")
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def import_loader_alone() -> None:
    """Import the config loader without the generated client (768 model modules: ~0.3 s
    and ~35 MB of this process's start, which the operator may be waiting for). The
    loader takes only `Configuration` and `ApiClient` from the client package; anything
    else asked of these packages imports them whole. If the library is laid out
    otherwise, the plain import runs."""
    spec = importlib.util.find_spec(GENERATED[0])
    if spec is None or not spec.submodule_search_locations:
        return
    if any(name in sys.modules for name in GENERATED):
        return
    root = Path(next(iter(spec.submodule_search_locations)))
    for name in GENERATED:
        sys.modules[name] = _Deferred(name, root.joinpath(*name.split(".")[1:]))
    try:
        client = sys.modules[GENERATED[1]]
        for module, name in (("api_client", "ApiClient"), ("configuration", "Configuration")):
            setattr(
                client, name, getattr(importlib.import_module(f"{client.__name__}.{module}"), name)
            )
        importlib.import_module("kubernetes_asyncio.config")
    except (ImportError, AttributeError):
        for name in GENERATED:
            if isinstance(sys.modules.get(name), _Deferred):
                del sys.modules[name]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("--service-account", type=Path, required=True)
    parser.add_argument("--answer-fd", type=int, required=True)
    args = parser.parse_args(argv)
    import_loader_alone()
    result = answer(args.kubeconfig, args.context, args.service_account)
    with os.fdopen(args.answer_fd, "wb") as out:
        out.write(msgspec.json.encode(result))
    return 0 if isinstance(result, Found) else 1


if __name__ == "__main__":
    sys.exit(main())
