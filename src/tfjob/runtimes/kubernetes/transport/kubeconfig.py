"""Read the kubeconfig or the service account: who we are to the API server, now.

Our own loader (yaml and the standard library) of what kubectl reads: `$KUBECONFIG`
(files joined by `:`, merged: the first file to name a cluster, user, context or
current-context wins; missing files are skipped) or the one `--kubeconfig` file; the
context and its namespace; the cluster's server, CA, insecure-skip-tls-verify and
tls-server-name; the user's client certificate and key, token or tokenFile, basic auth,
OIDC id-token or exec plugin (v1/v1beta1: a token or a client certificate, perhaps
with an expiry). Paths are relative to the file that names them. In a pod: the
service account's files and KUBERNETES_SERVICE_HOST/_PORT.

`read()` returns one reading (`Found`) with the files it came from and when its exec
credential expires, so `credentials.py` knows when to read again. Anything unusable is
a `CredentialsError` naming the file, the field and the fix.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfjob.api.errors import PermanentError
from tfjob.api.timestamps import parse_rfc3339

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT = 120.0  # seconds a plugin that cannot ask anyone anything may take
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # cluster config for provideClusterInfo


class CredentialsError(PermanentError):
    """The kubeconfig or the service account names credentials that cannot be used."""


@dataclass(frozen=True)
class Source:
    """Where the credentials are read from, chosen once: kubeconfig files (in the
    order they merge) and a context, or, with none, the service account (in a pod)."""

    kubeconfigs: tuple[Path, ...]
    context: str | None = None
    service_account: Path = SERVICE_ACCOUNT


@dataclass(frozen=True)
class ExecAnswer:
    """An exec plugin's credential, and the stanza (as JSON) that produced it."""

    stanza: str
    token: str | None
    certificate: str | None  # PEM
    key: str | None  # PEM
    obtained: float  # POSIX seconds
    expires: float | None  # POSIX seconds; None: until the API server says 401


@dataclass(frozen=True)
class Found:
    """One reading: enough for a TLS context and an Authorization header."""

    server: str
    who: str  # for messages: "user 'u' of /home/me/.kube/config"
    namespace: str = "default"
    ca: str | None = None  # PEM of the server's CA; None: the system's CAs
    verify: bool = True  # False only for insecure-skip-tls-verify
    tls_server_name: str | None = None
    certificate: str | None = None  # PEM of the client certificate (chain)
    key: str | None = None  # PEM of its key
    authorization: str | None = None  # "Bearer ...", "Basic ..."
    exec_answer: ExecAnswer | None = None
    files: tuple[Path, ...] = ()  # what was read: a change means read again


def choose(
    kubeconfig: str | None, context: str | None = None, service_account: Path = SERVICE_ACCOUNT
) -> Source:
    """`kubeconfig` (one file), else in-cluster credentials if this runs in a pod,
    else `$KUBECONFIG` (files joined by `:`), else ~/.kube/config."""
    in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and (service_account / "token").is_file()
    if kubeconfig is None and in_pod:
        return Source((), None, service_account)
    if kubeconfig is not None:
        named, paths = kubeconfig, [kubeconfig]
    else:
        named = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        paths = [one for one in named.split(os.pathsep) if one]
    files = tuple(Path(os.path.expanduser(one)).absolute() for one in paths)
    if not any(one.is_file() for one in files):
        if kubeconfig is not None:
            raise CredentialsError(f"{named}: no such file: give --kubeconfig an existing file")
        raise CredentialsError(
            f"{named}: no such file, and not in a pod (no service account): set KUBECONFIG"
            " or give --kubeconfig naming an existing kubeconfig"
        )
    return Source(files, context, service_account)


def read(source: Source, exec_answer: ExecAnswer | None = None) -> Found:
    """Read the credentials now. `exec_answer`, the plugin's last credential, is used
    instead of running the plugin again if the stanza is unchanged; the caller passes
    None when it has expired or the API server refused it."""
    if not source.kubeconfigs:
        return _read_service_account(source.service_account)
    return _Kubeconfig(source.kubeconfigs).found(source.context, exec_answer)


# -- in-cluster -----------------------------------------------------------------------


def _read_service_account(account: Path) -> Found:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise CredentialsError(
            "in a pod, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be"
            " set (the kubelet sets them): give --kubeconfig to use a kubeconfig instead"
        )
    with contextlib.suppress(ValueError):  # a name, not an address
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    token_file, ca_file = account / "token", account / "ca.crt"
    token = _read_text(token_file, "the service account token").strip()
    if not token:
        raise CredentialsError(f"{token_file}: the service account token is empty")
    ca = _read_text(ca_file, "the service account CA") if ca_file.is_file() else None
    namespace_file = account / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else ""
    return Found(
        server=f"https://{host}:{port}",
        who=f"the service account in {account}",
        namespace=namespace or "default",
        ca=ca,
        authorization=f"Bearer {token}",
        files=(token_file, *([ca_file] if ca is not None else [])),
    )


# -- kubeconfig -----------------------------------------------------------------------


class _Kubeconfig:
    """Kubeconfig files merged as kubectl merges them; each cluster, user and context
    is kept with the file that defined it (its paths are relative to that file)."""

    def __init__(self, files: tuple[Path, ...]) -> None:
        import yaml  # here: in a pod (the service account) it is not needed

        self.files = tuple(one for one in files if one.exists())
        self.named = os.pathsep.join(str(one) for one in files)
        self.entries: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {
            kind: {} for kind in ("clusters", "users", "contexts")
        }
        self.current = ""
        for file in self.files:
            try:
                loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                document = yaml.load(_read_text(file, "the kubeconfig"), Loader=loader)
            except yaml.YAMLError as error:
                where = getattr(error, "problem_mark", None)
                line = f" (line {where.line + 1})" if where is not None else ""
                raise CredentialsError(f"{file}: not valid YAML{line}: fix the file") from None
            if document is None:  # an empty file, as kubectl allows
                continue
            if not isinstance(document, dict):
                raise CredentialsError(f"{file}: a kubeconfig is a mapping (apiVersion, kind, ...)")
            for field, into in self.entries.items():
                for name, body in _named_list(document, field, file):
                    into.setdefault(name, (body, file))
            current = document.get("current-context")
            if not self.current and isinstance(current, str):
                self.current = current

    def found(self, context: str | None, exec_answer: ExecAnswer | None) -> Found:
        name = self._context_name(context)
        files = list(self.files)  # and then those the cluster and user name
        chosen = _Section(f"contexts[{name}]", *self.entries["contexts"][name], files)
        cluster_name = self._name(chosen, "cluster")
        if not cluster_name:
            raise CredentialsError(f"{chosen}.cluster is not set: name one of its clusters")
        cluster = _Section(
            f"clusters[{cluster_name}]", *self.entries["clusters"][cluster_name], files
        )
        server = cluster.string("server")
        if not server:
            raise CredentialsError(f"{cluster}.server is not set: add the API server's URL")
        server = server if "://" in server else f"https://{server}"
        verify = not cluster.body.get("insecure-skip-tls-verify")
        tls_server_name = cluster.string("tls-server-name") or None
        ca = cluster.pem("certificate-authority")
        user_name = self._name(chosen, "user")
        body, file = self.entries["users"].get(user_name, ({}, chosen.file))
        user = _Section(f"users[{user_name}]", body, file, files)
        certificate, key = user.pem("client-certificate"), user.pem("client-key")
        if (certificate is None) != (key is None):
            has, lacks = (
                ("client-certificate", "key") if key is None else ("client-key", "certificate")
            )
            raise CredentialsError(f"{user} has a {has} but no client-{lacks}(-data): give both")
        authorization = _token(user) or _basic(user) or _auth_provider(user)
        answer: ExecAnswer | None = None
        if user.body.get("exec") is not None and authorization is None:
            # The cluster is described to the plugin only if its stanza asks.
            answer = _exec(user, exec_answer, lambda: _cluster_info(cluster, server, ca))
            authorization = f"Bearer {answer.token}" if answer.token else None
            if answer.certificate is not None:
                certificate, key = answer.certificate, answer.key
        return Found(
            server=server,
            who=f"user {user_name!r} of {user.file}" if user_name else f"context {name!r}",
            namespace=chosen.string("namespace") or "default",
            ca=ca,
            verify=verify,
            tls_server_name=tls_server_name,
            certificate=certificate,
            key=key,
            authorization=authorization,
            exec_answer=answer,
            files=tuple(files),
        )

    def _name(self, chosen: _Section, kind: str) -> str:
        """The cluster or user the context names, which must be in a kubeconfig file."""
        name = chosen.string(kind)
        if name and name not in self.entries[f"{kind}s"]:
            raise CredentialsError(
                f"{chosen}.{kind} names {name!r}, which no kubeconfig file ({self.named})"
                f" has under {kind}s"
            )
        return name

    def _context_name(self, context: str | None) -> str:
        contexts = ", ".join(sorted(self.entries["contexts"]))
        if not contexts:
            raise CredentialsError(
                f"{self.named}: the kubeconfig has no contexts: add one"
                " (kubectl config set-context) or point KUBECONFIG at another file"
            )
        name = context or self.current
        if not name:
            raise CredentialsError(
                f"{self.named}: the kubeconfig has no current context (current-context):"
                " run kubectl config use-context NAME, or give the command --context NAME"
                f" (its contexts: {contexts})"
            )
        if name not in self.entries["contexts"]:
            how = "--context" if context else "current-context"
            raise CredentialsError(
                f"{self.named}: no context {name!r} ({how}); its contexts: {contexts}"
            )
        return name


class _Section:
    """A context, cluster or user: its fields, type-checked, and the files its paths
    name (relative to the kubeconfig that defined it), added to `files` as read."""

    def __init__(self, where: str, body: dict[str, Any], file: Path, files: list[Path]) -> None:
        self.where, self.body, self.file, self.files = where, body, file, files

    def __str__(self) -> str:
        return f"{self.file}: {self.where}"

    def string(self, field: str) -> str:
        value = self.body.get(field)
        if value is not None and not isinstance(value, str):
            raise CredentialsError(f"{self}.{field} must be a string, not {value!r}")
        return value or ""

    def read(self, field: str) -> str | None:
        """The file the path in `field` names, read now; None if `field` is not set."""
        path = self.string(field)
        if not path:
            return None
        resolved = _resolve(path, self.file)
        self.files.append(resolved)
        return _read_text(resolved, f"{self.where}.{field} in {self.file}")

    def pem(self, field: str) -> str | None:
        """`<field>-data` (base64 of PEM; PEM itself is taken too), else the file `field` names."""
        data = self.string(f"{field}-data")
        if not data:
            return self.read(field)
        if "-----BEGIN" in data:
            return data
        try:
            decoded = base64.b64decode("".join(data.split()), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialsError(
                f"{self}.{field}-data is not base64 of PEM data: encode the file with base64 -w0"
            ) from None
        if "-----BEGIN" not in decoded:
            raise CredentialsError(f"{self}.{field}-data is base64 but not of PEM data")
        return decoded


def _named_list(
    document: dict[str, Any], field: str, file: Path
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A kubeconfig list of {name, <field without its s>: {...}} entries."""
    inner, entries = field[:-1], document.get(field) or []
    if not isinstance(entries, list):
        raise CredentialsError(f"{file}: {field} must be a list of {{name, {inner}}} entries")
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CredentialsError(f"{file}: {field}[{index}] has no name")
        body = entry.get(inner)
        if body is not None and not isinstance(body, dict):
            raise CredentialsError(f"{file}: {field}[{name}].{inner} must be a mapping")
        yield name, body or {}


def _token(user: _Section) -> str | None:
    """tokenFile, read every time (it may be rotated), else token."""
    token = (user.read("tokenFile") or "").strip() or user.string("token")
    return f"Bearer {token}" if token else None


def _basic(user: _Section) -> str | None:
    username, password = user.string("username"), user.string("password")
    if not username and not password:
        return None
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _auth_provider(user: _Section) -> str | None:
    provider = user.body.get("auth-provider")
    if not provider:
        return None
    name = provider.get("name") if isinstance(provider, dict) else None
    config = (provider.get("config") or {}) if isinstance(provider, dict) else {}
    if name == "oidc" and isinstance(config, dict) and config.get("id-token"):
        return f"Bearer {config['id-token']}"
    raise CredentialsError(
        f"{user}.auth-provider {name!r} is not supported (client-go dropped auth"
        " providers): use an exec plugin, e.g. kubelogin for OIDC, gke-gcloud-auth-plugin,"
        " kubelogin for AKS"
    )


def _cluster_info(cluster: _Section, server: str, ca: str | None) -> dict[str, Any]:
    """The cluster as an exec plugin is told it (provideClusterInfo)."""
    info: dict[str, Any] = {"server": server}
    if tls_server_name := cluster.string("tls-server-name"):
        info["tls-server-name"] = tls_server_name
    if cluster.body.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca.encode()).decode()
    for extension in cluster.body.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _exec(
    user: _Section, last: ExecAnswer | None, cluster_info: Callable[[], dict[str, Any]]
) -> ExecAnswer:
    """The exec plugin's credential: `last` if the stanza is unchanged, else run it."""
    stanza, where = user.body["exec"], f"{user}.exec"
    if not isinstance(stanza, dict):
        raise CredentialsError(f"{where} must be a mapping (apiVersion, command, args)")
    key = json.dumps(stanza, sort_keys=True, default=str)
    if last is not None and last.stanza == key:
        return last
    version = stanza.get("apiVersion")
    if version not in EXEC_API_VERSIONS:
        raise CredentialsError(
            f"{where}.apiVersion is {version!r}: set one of {', '.join(EXEC_API_VERSIONS)}"
            " (v1alpha1 was removed in Kubernetes 1.24)"
        )
    command = stanza.get("command")
    if not isinstance(command, str) or not command:
        raise CredentialsError(f"{where}.command is not set: name the plugin to run")
    if os.sep in command and not os.path.isabs(command):
        command = str(_resolve(command, user.file))
    args, env_list = stanza.get("args") or [], stanza.get("env") or []
    if not isinstance(args, list) or not isinstance(env_list, list):
        raise CredentialsError(f"{where}: args and env must be lists")
    mode = stanza.get("interactiveMode") or "IfAvailable"
    if mode not in ("Never", "IfAvailable", "Always"):
        raise CredentialsError(
            f"{where}.interactiveMode is {mode!r}: set Never, IfAvailable or Always"
        )
    interactive = mode != "Never" and _terminal()
    if mode == "Always" and not interactive:
        raise CredentialsError(
            f"{where}.interactiveMode is Always but there is no terminal to ask on:"
            " log in beforehand, or use credentials that need no prompt"
        )
    spec: dict[str, Any] = {"interactive": interactive}
    if stanza.get("provideClusterInfo"):
        spec["cluster"] = cluster_info()
    env = dict(os.environ)
    for item in env_list:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise CredentialsError(f"{where}.env: each entry needs a name and a value")
        env[item["name"]] = str(item.get("value", ""))
    info = {"apiVersion": version, "kind": "ExecCredential", "spec": spec}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    argv = [command, *(str(one) for one in args)]
    output = _run_plugin(argv, env, interactive, where, stanza.get("installHint"))
    return _exec_answer(output, version, key, where)


def _run_plugin(
    argv: list[str], env: dict[str, str], interactive: bool, where: str, hint: object
) -> bytes:
    """Run the plugin: its stdout is the answer; with a terminal it may ask on it (stdin
    and stderr stay ours), without one its stderr is kept for the error message."""
    plugin = f"{where}: the exec plugin {argv[0]!r}"
    try:
        done = subprocess.run(
            argv,
            env=env,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,
            timeout=None if interactive else EXEC_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        fix = " ".join(str(hint).split()) if hint else "install it or fix exec.command"
        raise CredentialsError(f"{plugin} was not found: {fix}") from None
    except PermissionError:
        raise CredentialsError(f"{plugin} is not executable") from None
    except subprocess.TimeoutExpired:
        raise CredentialsError(f"{plugin} gave no answer in {EXEC_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        tail = f": {' / '.join(said)}" if said else ""
        raise CredentialsError(f"{plugin} exited with status {done.returncode}{tail}")
    if done.stderr:  # a plugin's warnings are the user's to read
        sys.stderr.write(done.stderr.decode(errors="replace"))
        sys.stderr.flush()
    return done.stdout


def _terminal() -> bool:
    """Whether an exec plugin could ask someone: our stdin is a terminal."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False


def _exec_answer(output: bytes, version: str, stanza: str, where: str) -> ExecAnswer:
    """The plugin's ExecCredential: a token, or a client certificate and key (PEM)."""
    plugin = f"{where}: the exec plugin"
    try:
        credential = json.loads(output)
    except ValueError:
        raise CredentialsError(f"{plugin} did not print JSON") from None
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise CredentialsError(f"{plugin} did not print an ExecCredential")
    if credential.get("apiVersion") != version:
        raise CredentialsError(
            f"{plugin} answered as {credential.get('apiVersion')!r}, asked as {version!r}:"
            " set exec.apiVersion to the version the plugin speaks"
        )
    status = credential.get("status")
    if not isinstance(status, dict):
        raise CredentialsError(f"{plugin}'s ExecCredential has no status")
    token, certificate, key = (
        str(status[field]) if status.get(field) else None
        for field in ("token", "clientCertificateData", "clientKeyData")
    )
    if (certificate is None) != (key is None):
        raise CredentialsError(
            f"{plugin} gave clientCertificateData or clientKeyData without the other"
        )
    if token is None and certificate is None:
        raise CredentialsError(f"{plugin}'s status has neither a token nor a client certificate")
    expires: float | None = None
    if stamp := status.get("expirationTimestamp"):
        try:
            expires = parse_rfc3339(str(stamp)).timestamp()
        except ValueError:
            raise CredentialsError(
                f"{plugin}'s expirationTimestamp {stamp!r} is not RFC 3339"
            ) from None
    return ExecAnswer(stanza, token, certificate, key, obtained=time.time(), expires=expires)


# -- helpers --------------------------------------------------------------------------


def _resolve(path: str, file: Path) -> Path:
    """A path in a kubeconfig: relative to the folder of the file that names it."""
    expanded = Path(os.path.expanduser(path))
    return expanded if expanded.is_absolute() else file.parent / expanded


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise CredentialsError(f"{what}: {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise CredentialsError(f"{what}: {path}: cannot be read ({reason})") from None
