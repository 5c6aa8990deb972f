"""Read the kubeconfig or the service account: who we are to the API server, now.

A small loader of ours, in the calling process, with no HTTP stack of its own (yaml
and the standard library). What it reads, as kubectl does:

- `$KUBECONFIG` with several files joined by `:` merged (a file that does not exist
  is skipped; the first file to name a cluster, user or context wins, and the
  current-context is the first one set); `--kubeconfig` names one file.
- the context (the current one, or the one asked for) and its namespace;
- the cluster: `server`, `certificate-authority(-data)`, `insecure-skip-tls-verify`,
  `tls-server-name`;
- the user: `client-certificate(-data)`, `client-key(-data)`, `token`, `tokenFile`,
  `username`/`password`, an OIDC auth-provider's `id-token`, and exec plugins
  (client.authentication.k8s.io/v1 and v1beta1: a token or a client certificate, with
  an optional `expirationTimestamp`);
- a relative path is relative to the folder of the file that names it;
- in-cluster: the service account's token, CA and namespace files and
  `KUBERNETES_SERVICE_HOST`/`_PORT`.

`read()` returns one reading (`Found`): the server, PEM data, the Authorization header,
when an exec credential expires, and the files read, so `credentials.py` can read again
when one of them changes, when the credential expires, or after a 401. Anything that
cannot be used is a `CredentialsError` naming the file, the field and the fix.
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
    order they merge) and a context, or else the service account (in-cluster)."""

    kubeconfigs: tuple[Path, ...]
    context: str | None = None
    service_account: Path = SERVICE_ACCOUNT

    @property
    def in_cluster(self) -> bool:
        return not self.kubeconfigs


@dataclass(frozen=True)
class ExecAnswer:
    """An exec plugin's credential, and the stanza that produced it (a changed
    stanza runs the plugin again)."""

    stanza: str  # the exec stanza as JSON
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
    if kubeconfig is None and _in_pod(service_account):
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


def _in_pod(service_account: Path) -> bool:
    return (service_account / "token").is_file() and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def read(source: Source, exec_answer: ExecAnswer | None = None) -> Found:
    """Read the credentials now. `exec_answer`, the plugin's last credential, is used
    instead of running the plugin again if the stanza is unchanged; the caller passes
    None when it has expired or the API server refused it."""
    if source.in_cluster:
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


@dataclass(frozen=True)
class _Entry:
    """A named cluster, user or context, and the file that defined it."""

    body: dict[str, Any]
    file: Path


class _Kubeconfig:
    """Kubeconfig files merged as kubectl merges them."""

    def __init__(self, files: tuple[Path, ...]) -> None:
        self.files = tuple(one for one in files if one.exists())
        self.named = os.pathsep.join(str(one) for one in files)
        self.clusters: dict[str, _Entry] = {}
        self.users: dict[str, _Entry] = {}
        self.contexts: dict[str, _Entry] = {}
        self.current: str = ""
        for file in self.files:
            self._merge(file)

    def _merge(self, file: Path) -> None:
        import yaml  # here: in a pod (the service account) it is not needed

        text = _read_text(file, "the kubeconfig")
        try:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            document = yaml.load(text, Loader=loader)  # a safe loader
        except yaml.YAMLError as error:
            where = getattr(error, "problem_mark", None)
            line = f" (line {where.line + 1})" if where is not None else ""
            raise CredentialsError(f"{file}: not valid YAML{line}: fix the file") from None
        if document is None:  # an empty file, as kubectl allows
            return
        if not isinstance(document, dict):
            raise CredentialsError(f"{file}: a kubeconfig is a mapping (apiVersion, kind, ...)")
        for field, into, inner in (
            ("clusters", self.clusters, "cluster"),
            ("users", self.users, "user"),
            ("contexts", self.contexts, "context"),
        ):
            for name, body in _named_list(document, field, inner, file):
                into.setdefault(name, _Entry(body, file))
        current = document.get("current-context")
        if not self.current and isinstance(current, str):
            self.current = current

    def found(self, context: str | None, exec_answer: ExecAnswer | None) -> Found:
        name = self._context_name(context)
        chosen = self.contexts[name]
        cluster_name = _string(chosen.body, "cluster", f"contexts[{name}]", chosen.file)
        if not cluster_name:
            raise CredentialsError(
                f"{chosen.file}: contexts[{name}].cluster is not set: name one of its clusters"
            )
        if cluster_name not in self.clusters:
            raise CredentialsError(
                f"{chosen.file}: contexts[{name}].cluster names {cluster_name!r}, which no"
                f" kubeconfig file ({self.named}) has under clusters"
            )
        cluster = _Cluster(cluster_name, self.clusters[cluster_name])
        user_name = _string(chosen.body, "user", f"contexts[{name}]", chosen.file)
        if user_name and user_name not in self.users:
            raise CredentialsError(
                f"{chosen.file}: contexts[{name}].user names {user_name!r}, which no"
                f" kubeconfig file ({self.named}) has under users"
            )
        user = self.users.get(user_name, _Entry({}, chosen.file))
        reader = _UserReader(user_name, user, cluster)
        identity = reader.read(exec_answer)
        namespace = _string(chosen.body, "namespace", f"contexts[{name}]", chosen.file)
        return Found(
            server=cluster.server,
            who=f"user {user_name!r} of {user.file}" if user_name else f"context {name!r}",
            namespace=namespace or "default",
            ca=cluster.ca,
            verify=not cluster.insecure,
            tls_server_name=cluster.tls_server_name,
            certificate=identity.certificate,
            key=identity.key,
            authorization=identity.authorization,
            exec_answer=identity.exec_answer,
            files=(*self.files, *cluster.files, *reader.files),
        )

    def _context_name(self, context: str | None) -> str:
        if not self.contexts:
            raise CredentialsError(
                f"{self.named}: the kubeconfig has no contexts: add one"
                " (kubectl config set-context) or point KUBECONFIG at another file"
            )
        name = context or self.current
        if not name:
            raise CredentialsError(
                f"{self.named}: the kubeconfig has no current context (current-context):"
                " run kubectl config use-context NAME, or give the command --context NAME"
                f" (its contexts: {', '.join(sorted(self.contexts))})"
            )
        if name not in self.contexts:
            how = "--context" if context else "current-context"
            raise CredentialsError(
                f"{self.named}: no context {name!r} ({how}); its contexts:"
                f" {', '.join(sorted(self.contexts))}"
            )
        return name


class _Cluster:
    """A cluster's server and how to trust it."""

    def __init__(self, name: str, entry: _Entry) -> None:
        where, body, file = f"clusters[{name}]", entry.body, entry.file
        server = _string(body, "server", where, file)
        if not server:
            raise CredentialsError(f"{file}: {where}.server is not set: add the API server's URL")
        self.server = server if "://" in server else f"https://{server}"
        self.body = body
        self.insecure = bool(body.get("insecure-skip-tls-verify"))
        self.tls_server_name = _string(body, "tls-server-name", where, file) or None
        self.files: list[Path] = []
        data = _string(body, "certificate-authority-data", where, file)
        path = _string(body, "certificate-authority", where, file)
        self.ca: str | None = None
        if data:
            self.ca = _pem(data, f"{where}.certificate-authority-data", file)
        elif path:
            ca_file = _resolve(path, file)
            self.files.append(ca_file)
            self.ca = _read_text(ca_file, f"{where}.certificate-authority in {file}")

    def exec_info(self) -> dict[str, Any]:
        """The cluster as an exec plugin is told it (provideClusterInfo)."""
        info: dict[str, Any] = {"server": self.server}
        if self.tls_server_name:
            info["tls-server-name"] = self.tls_server_name
        if self.insecure:
            info["insecure-skip-tls-verify"] = True
        if self.ca:
            info["certificate-authority-data"] = base64.b64encode(self.ca.encode()).decode()
        for extension in self.body.get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
                info["config"] = extension.get("extension")
        return info


@dataclass(frozen=True)
class _Identity:
    certificate: str | None = None
    key: str | None = None
    authorization: str | None = None
    exec_answer: ExecAnswer | None = None


class _UserReader:
    """A user's credentials: certificate and key, token, basic auth or exec plugin."""

    def __init__(self, name: str, entry: _Entry, cluster: _Cluster) -> None:
        self.where = f"users[{name}]"
        self.body = entry.body
        self.file = entry.file
        self.cluster = cluster
        self.files: list[Path] = []

    def read(self, exec_answer: ExecAnswer | None) -> _Identity:
        certificate = self._pem("client-certificate")
        key = self._pem("client-key")
        if (certificate is None) != (key is None):
            has, lacks = (
                ("client-certificate", "client-key")
                if key is None
                else ("client-key", "client-certificate")
            )
            raise CredentialsError(
                f"{self.file}: {self.where} has a {has} but no {lacks}(-data): give both"
            )
        authorization = self._token() or self._basic() or self._auth_provider()
        answer: ExecAnswer | None = None
        if self.body.get("exec") is not None and authorization is None:
            answer = self._exec(exec_answer)
            authorization = f"Bearer {answer.token}" if answer.token else None
            if answer.certificate is not None:
                certificate, key = answer.certificate, answer.key
        return _Identity(certificate, key, authorization, answer)

    def _field(self, name: str) -> str:
        return _string(self.body, name, self.where, self.file)

    def _pem(self, field: str) -> str | None:
        data = self._field(f"{field}-data")
        if data:
            return _pem(data, f"{self.where}.{field}-data", self.file)
        path = self._field(field)
        if not path:
            return None
        resolved = _resolve(path, self.file)
        self.files.append(resolved)
        return _read_text(resolved, f"{self.where}.{field} in {self.file}")

    def _token(self) -> str | None:
        """tokenFile, read every time (it may be rotated), else token."""
        path = self._field("tokenFile")
        if path:
            resolved = _resolve(path, self.file)
            self.files.append(resolved)
            token = _read_text(resolved, f"{self.where}.tokenFile in {self.file}").strip()
            if token:
                return f"Bearer {token}"
        token = self._field("token")
        return f"Bearer {token}" if token else None

    def _basic(self) -> str | None:
        username, password = self._field("username"), self._field("password")
        if not username and not password:
            return None
        pair = base64.b64encode(f"{username}:{password}".encode()).decode()
        return f"Basic {pair}"

    def _auth_provider(self) -> str | None:
        provider = self.body.get("auth-provider")
        if not provider:
            return None
        name = provider.get("name") if isinstance(provider, dict) else None
        config = (provider.get("config") or {}) if isinstance(provider, dict) else {}
        if name == "oidc" and isinstance(config, dict) and config.get("id-token"):
            return f"Bearer {config['id-token']}"
        raise CredentialsError(
            f"{self.file}: {self.where}.auth-provider {name!r} is not supported (client-go"
            " dropped auth providers): use an exec plugin, e.g. kubelogin for OIDC,"
            " gke-gcloud-auth-plugin, kubelogin for AKS"
        )

    def _exec(self, last: ExecAnswer | None) -> ExecAnswer:
        stanza = self.body["exec"]
        where = f"{self.file}: {self.where}.exec"
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
            command = str(_resolve(command, self.file))
        args = stanza.get("args") or []
        env_list = stanza.get("env") or []
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
            spec["cluster"] = self.cluster.exec_info()
        info = {"apiVersion": version, "kind": "ExecCredential", "spec": spec}
        env = dict(os.environ)
        for item in env_list:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise CredentialsError(f"{where}.env: each entry needs a name and a value")
            env[item["name"]] = str(item.get("value", ""))
        env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        output = _run_plugin(
            [command, *(str(one) for one in args)], env, interactive, where, stanza
        )
        return _exec_answer(output, version, key, where)


def _run_plugin(
    argv: list[str], env: dict[str, str], interactive: bool, where: str, stanza: dict[str, Any]
) -> bytes:
    """Run the plugin: its stdout is the answer; with a terminal it may ask on it (stdin
    and stderr stay ours), without one its stderr is kept for the error message."""
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
        hint = stanza.get("installHint")
        fix = f": {' '.join(str(hint).split())}" if hint else ": install it or fix exec.command"
        raise CredentialsError(f"{where}: the exec plugin {argv[0]!r} was not found{fix}") from None
    except PermissionError:
        raise CredentialsError(f"{where}: the exec plugin {argv[0]!r} is not executable") from None
    except subprocess.TimeoutExpired:
        raise CredentialsError(
            f"{where}: the exec plugin {argv[0]!r} gave no answer in {EXEC_TIMEOUT:.0f} s"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
        tail = f": {' / '.join(said)}" if said else ""
        raise CredentialsError(
            f"{where}: the exec plugin {argv[0]!r} exited with status {done.returncode}{tail}"
        )
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
    try:
        credential = json.loads(output)
    except ValueError:
        raise CredentialsError(f"{where}: the exec plugin did not print JSON") from None
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise CredentialsError(f"{where}: the exec plugin did not print an ExecCredential")
    if credential.get("apiVersion") != version:
        raise CredentialsError(
            f"{where}: the exec plugin answered as {credential.get('apiVersion')!r}, asked as"
            f" {version!r}: set exec.apiVersion to the version the plugin speaks"
        )
    status = credential.get("status")
    if not isinstance(status, dict):
        raise CredentialsError(f"{where}: the exec plugin's ExecCredential has no status")
    token = status.get("token") or None
    certificate = status.get("clientCertificateData") or None
    key = status.get("clientKeyData") or None
    if (certificate is None) != (key is None):
        raise CredentialsError(
            f"{where}: the exec plugin gave clientCertificateData or clientKeyData without"
            " the other"
        )
    if token is None and certificate is None:
        raise CredentialsError(
            f"{where}: the exec plugin's status has neither a token nor a client certificate"
        )
    expires: float | None = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            expires = parse_rfc3339(str(stamp)).timestamp()
        except ValueError:
            raise CredentialsError(
                f"{where}: the exec plugin's expirationTimestamp {stamp!r} is not RFC 3339"
            ) from None
    return ExecAnswer(
        stanza=stanza,
        token=str(token) if token is not None else None,
        certificate=str(certificate) if certificate is not None else None,
        key=str(key) if key is not None else None,
        obtained=time.time(),
        expires=expires,
    )


# -- helpers --------------------------------------------------------------------------


def _named_list(
    document: dict[str, Any], field: str, inner: str, file: Path
) -> list[tuple[str, dict[str, Any]]]:
    """A kubeconfig list of {name, <inner>: {...}} entries."""
    entries = document.get(field) or []
    if not isinstance(entries, list):
        raise CredentialsError(f"{file}: {field} must be a list of {{name, {inner}}} entries")
    named: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        body = entry.get(inner) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CredentialsError(f"{file}: {field}[{index}] has no name")
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise CredentialsError(f"{file}: {field}[{name}].{inner} must be a mapping")
        named.append((name, body))
    return named


def _string(body: dict[str, Any], field: str, where: str, file: Path) -> str:
    value = body.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CredentialsError(f"{file}: {where}.{field} must be a string, not {value!r}")
    return value


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


def _pem(data: str, where: str, file: Path) -> str:
    """A *-data field: base64 of PEM (PEM itself is taken too)."""
    if "-----BEGIN" in data:
        return data
    try:
        decoded = base64.b64decode("".join(data.split()), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise CredentialsError(
            f"{file}: {where} is not base64 of PEM data: encode the file with base64 -w0"
        ) from None
    if "-----BEGIN" not in decoded:
        raise CredentialsError(f"{file}: {where} is base64 but not of PEM data")
    return decoded
