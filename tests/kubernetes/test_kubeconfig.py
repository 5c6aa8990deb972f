"""Reading kubeconfigs and service accounts as kubectl does, without an API server:
which server, namespace, CA, client certificate and Authorization header a user's
files come to, when they are read again, and what a file that cannot be used says.
(tests/kubernetes/test_credentials.py uses the same credentials against a real API
server.)
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.controlplane import _Certificates
from tfjob.runtimes.kubernetes.transport import credentials
from tfjob.runtimes.kubernetes.transport.credentials import CredentialsError, connection
from tfjob.runtimes.kubernetes.transport.kubeconfig import Source, choose, read

CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"  # read, not used


@pytest.fixture(scope="module")
def real_ca(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CA certificate ssl accepts, for readings that build a TLS context."""
    certificates = _Certificates(tmp_path_factory.mktemp("ca"))
    certificates.generate()
    return certificates.ca_cert.read_text()


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def _config(
    users: dict[str, dict[str, Any]],
    *,
    current: str | None = "u",
    server: str = "https://127.0.0.1:6443",
    cluster: dict[str, Any] | None = None,
    namespace: str = "",
) -> dict[str, Any]:
    """One cluster "c" and, for each user, a context of the same name."""
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": server}}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [
            {"name": name, "context": {"cluster": "c", "user": name, "namespace": namespace}}
            for name in users
        ],
    }
    if current:
        config["current-context"] = current
    return config


def _plugin(folder: Path, *, version: str = "client.authentication.k8s.io/v1") -> dict[str, Any]:
    """An exec plugin answering with the token in folder/token, expiring folder/life
    seconds after it runs if that file exists; each run appends its
    KUBERNETES_EXEC_INFO and $GREETING to folder/runs."""
    script = folder / "plugin.py"
    script.write_text(
        "import json, os, sys, datetime\n"
        "folder = os.path.dirname(os.path.abspath(__file__))\n"
        "with open(os.path.join(folder, 'runs'), 'a') as runs:\n"
        "    runs.write(json.dumps([os.environ['KUBERNETES_EXEC_INFO'],"
        " os.environ.get('GREETING')]) + '\\n')\n"
        "status = {'token': open(os.path.join(folder, 'token')).read().strip()}\n"
        "life = os.path.join(folder, 'life')\n"
        "if os.path.exists(life):\n"
        "    at = datetime.datetime.now(datetime.timezone.utc)"
        " + datetime.timedelta(seconds=float(open(life).read()))\n"
        "    status['expirationTimestamp'] = at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')\n"
        f"json.dump({{'apiVersion': {version!r}, 'kind': 'ExecCredential', 'status': status}},"
        " sys.stdout)\n"
    )
    (folder / "token").write_text("first")
    return {
        "exec": {
            "apiVersion": version,
            "command": sys.executable,
            "args": [str(script)],
            "env": [{"name": "GREETING", "value": "hello"}],
            "interactiveMode": "Never",
        }
    }


def _runs(folder: Path) -> list[list[Any]]:
    path = folder / "runs"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose their kubeconfig; a CI pod's service account must not win."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


# -- which files, which context -------------------------------------------------------


def test_kubeconfig_files_merge_first_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As kubectl: a name defined in two files is taken from the first, the current
    context from the first file that sets one, and a listed file that is missing is
    skipped."""
    first = _config({"u": {"token": "from-first"}}, current=None, server="https://first:1")
    second = _config(
        {"u": {"token": "from-second"}, "other": {"token": "o"}},
        current="other",
        server="https://second:2",
        namespace="team-b",
    )
    paths = [
        _write(tmp_path / "a" / "config", first),
        tmp_path / "missing",
        _write(tmp_path / "b" / "config", second),
    ]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(str(one) for one in paths))
    conn = connection(None)
    assert conn.server == "https://first:1"  # cluster "c": the first file's
    assert conn.namespace == "team-b"  # context "other", current in the second file
    found = read(choose(None, "u"))
    assert found.authorization == "Bearer from-first"


def test_kubeconfig_flag_names_one_file_and_kubeconfig_variable_is_then_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flagged = _write(tmp_path / "flagged", _config({"u": {"token": "flag"}}))
    listed = _write(tmp_path / "listed", _config({"u": {"token": "env"}}))
    monkeypatch.setenv("KUBECONFIG", str(listed))
    assert read(choose(str(flagged))).authorization == "Bearer flag"
    assert read(choose(None)).authorization == "Bearer env"


def test_context_namespace_and_user(tmp_path: Path) -> None:
    config = _config({"a": {"token": "ta"}, "b": {"token": "tb"}}, current="a")
    config["contexts"][1]["context"]["namespace"] = "team-b"
    path = _write(tmp_path / "kc", config)
    assert read(choose(str(path))).namespace == "default"
    other = read(choose(str(path), "b"))
    assert (other.namespace, other.authorization) == ("team-b", "Bearer tb")


def test_relative_paths_are_relative_to_the_file_that_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster's CA from one file's folder, a user's token file from another's."""
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "ca.pem").write_text(CA)
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "token").write_text("token-from-file\n")
    clusters = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://x:1", "certificate-authority": "ca.pem"}}
        ],
    }
    users = _config({"u": {"tokenFile": "token"}})
    del users["clusters"]
    paths = [
        _write(tmp_path / "clusters" / "kc", clusters),
        _write(tmp_path / "users" / "kc", users),
    ]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(str(one) for one in paths))
    monkeypatch.chdir(tmp_path)  # not where the files are
    found = read(choose(None))
    assert found.ca == CA
    assert found.authorization == "Bearer token-from-file"


def test_inline_data_and_files_give_the_same_pem(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text(CA)
    inline = {
        "server": "https://x:1",
        "certificate-authority-data": base64.b64encode(CA.encode()).decode(),
    }
    from_file = {"server": "https://x:1", "certificate-authority": str(tmp_path / "ca.pem")}
    as_pem = {"server": "https://x:1", "certificate-authority-data": CA}
    for number, cluster in enumerate((inline, from_file, as_pem)):
        path = _write(tmp_path / f"kc{number}", _config({"u": {"token": "t"}}, cluster=cluster))
        assert read(choose(str(path))).ca == CA


def test_token_file_wins_over_token_and_basic_auth(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    users = {
        "both": {"token": "inline", "tokenFile": str(tmp_path / "token")},
        "basic": {"username": "ann", "password": "secret"},
        "nobody": {},
    }
    path = str(_write(tmp_path / "kc", _config(users, current="both")))
    assert read(choose(path)).authorization == "Bearer from-file"
    basic = base64.b64encode(b"ann:secret").decode()
    assert read(choose(path, "basic")).authorization == f"Basic {basic}"
    assert read(choose(path, "nobody")).authorization is None


async def test_a_rotated_token_file_is_read_again_without_a_401(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    path = _write(tmp_path / "kc", _config({"u": {"tokenFile": str(token)}}))
    conn = connection(str(path))
    before = await conn.credentials.auth()
    token.write_text("new, and longer")
    assert await conn.credentials.header() == "Bearer old"  # looked at every FILE_CHECK s
    monkeypatch.setattr(credentials, "FILE_CHECK", 0.0)
    after = await conn.credentials.auth()
    assert after.authorization == "Bearer new, and longer"
    assert after is not before
    assert await conn.credentials.auth() is after  # nothing changed since: the same


# -- exec plugins ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
def test_exec_plugin_gets_its_env_and_exec_info(tmp_path: Path, version: str) -> None:
    user = _plugin(tmp_path, version=version)
    user["exec"]["provideClusterInfo"] = True
    cluster = {"server": "https://x:1", "certificate-authority-data": CA, "tls-server-name": "api"}
    path = _write(tmp_path / "kc", _config({"u": user}, cluster=cluster))
    assert read(choose(str(path))).authorization == "Bearer first"
    [(info, greeting)] = _runs(tmp_path)
    assert greeting == "hello"
    spec = json.loads(info)
    assert (spec["apiVersion"], spec["kind"]) == (version, "ExecCredential")
    assert spec["spec"]["interactive"] is False
    told = spec["spec"]["cluster"]
    assert (told["server"], told["tls-server-name"]) == ("https://x:1", "api")
    assert base64.b64decode(told["certificate-authority-data"]).decode() == CA


def test_exec_command_with_a_slash_is_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    user = _plugin(tmp_path)
    launcher = tmp_path / "bin" / "plugin"
    launcher.parent.mkdir()
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'plugin.py'}\n")
    launcher.chmod(0o755)
    user["exec"].update(command="bin/plugin", args=[])
    path = _write(tmp_path / "kc", _config({"u": user}))
    assert read(choose(str(path))).authorization == "Bearer first"


async def test_an_expiring_exec_credential_is_renewed_before_it_expires(
    tmp_path: Path,
) -> None:
    (tmp_path / "life").write_text("2")
    path = _write(tmp_path / "kc", _config({"u": _plugin(tmp_path)}))
    conn = connection(str(path))
    assert await conn.credentials.header() == "Bearer first"
    (tmp_path / "token").write_text("second")
    assert await conn.credentials.header() == "Bearer first"  # not expiring yet
    await asyncio.sleep(2.0)  # past the renewal (a quarter of its 2 s life ahead of its end)
    assert await conn.credentials.header() == "Bearer second"
    assert len(_runs(tmp_path)) == 2


async def test_an_exec_credential_without_expiry_is_kept_until_a_401(tmp_path: Path) -> None:
    path = _write(tmp_path / "kc", _config({"u": _plugin(tmp_path)}))
    conn = connection(str(path))
    (tmp_path / "token").write_text("second")
    assert await conn.credentials.header() == "Bearer first"
    assert await conn.credentials.refresh() is True  # what the client does on a 401
    assert await conn.credentials.header() == "Bearer second"
    assert len(_runs(tmp_path)) == 2


async def test_a_plugin_that_fails_at_renewal_keeps_the_last_credential(
    tmp_path: Path,
) -> None:
    """A renewal that fails leaves the last token (the API server decides); the 401
    that may follow reads again and says why."""
    (tmp_path / "life").write_text("1")
    path = _write(tmp_path / "kc", _config({"u": _plugin(tmp_path)}))
    conn = connection(str(path))
    (tmp_path / "token").unlink()
    await asyncio.sleep(1.0)
    assert await conn.credentials.header() == "Bearer first"
    assert await conn.credentials.header() == "Bearer first"
    assert len(_runs(tmp_path)) == 2  # one failed renewal, not one per request
    with pytest.raises(CredentialsError, match=r"exited with status 1: .*No such file"):
        await conn.credentials.refresh()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"command": "no-such-plugin-here", "installHint": "brew install\n it"}, "not found: brew install it"),
        ({"command": "false", "args": []}, "exited with status 1"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "v1alpha1 was removed"),
        ({"interactiveMode": "Always"}, "no terminal"),
        ({"interactiveMode": "Sometimes"}, "Never, IfAvailable or Always"),
    ],
)  # fmt: skip
def test_exec_plugin_errors_say_what_to_do(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    user = _plugin(tmp_path)
    user["exec"].update(change)
    path = _write(tmp_path / "kc", _config({"u": user}))
    with pytest.raises(CredentialsError, match=message) as error:
        connection(str(path))
    assert "users[u].exec" in str(error.value)


@pytest.mark.parametrize(
    ("printed", "message"),
    [
        ("not json", "did not print JSON"),
        ('{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}}', "answered as"),
        ('{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {}}', "neither a token nor"),
        ('{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"clientCertificateData": "x"}}', "without the other"),
        ('{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t", "expirationTimestamp": "soon"}}', "not RFC 3339"),
    ],
)  # fmt: skip
def test_exec_plugin_answers_that_cannot_be_used(
    tmp_path: Path, printed: str, message: str
) -> None:
    (tmp_path / "answer").write_text(printed)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "cat",
            "args": [str(tmp_path / "answer")],
            "interactiveMode": "Never",
        }
    }
    path = _write(tmp_path / "kc", _config({"u": user}))
    with pytest.raises(CredentialsError, match=message):
        connection(str(path))


def test_exec_expiration_timestamp_is_read(tmp_path: Path) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    answer = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "t", "expirationTimestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
    (tmp_path / "answer").write_text(json.dumps(answer))
    user = {"exec": {"apiVersion": answer["apiVersion"], "command": "cat", "args": [str(tmp_path / "answer")], "interactiveMode": "Never"}}  # fmt: skip
    found = read(choose(str(_write(tmp_path / "kc", _config({"u": user})))))
    assert found.exec_answer is not None and found.exec_answer.expires is not None
    assert abs(found.exec_answer.expires - at.replace(microsecond=0).timestamp()) < 1e-3


# -- in-cluster -----------------------------------------------------------------------


def _service_account(folder: Path, ca: str = CA) -> Path:
    folder.mkdir()
    (folder / "token").write_text("sa-token\n")
    (folder / "ca.crt").write_text(ca)
    (folder / "namespace").write_text("team-c")
    return folder


def test_in_cluster_wins_unless_a_kubeconfig_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_ca: str
) -> None:
    account = _service_account(tmp_path / "sa", real_ca)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(_write(tmp_path / "kc", _config({"u": {"token": "t"}}))))
    conn = connection(None, service_account=account)
    assert (conn.server, conn.namespace) == ("https://[fd00::1]:443", "team-c")
    found = read(choose(None, service_account=account))
    assert (found.ca, found.authorization) == (real_ca, "Bearer sa-token")
    assert (
        connection(str(tmp_path / "kc"), service_account=account).server == "https://127.0.0.1:6443"
    )


def test_in_cluster_without_the_port_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = _service_account(tmp_path / "sa")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(CredentialsError, match="KUBERNETES_SERVICE_PORT"):
        read(Source((), None, account))


# -- kubeconfigs that cannot be used --------------------------------------------------


def _broken(config: dict[str, Any], *paths: tuple[str, Any]) -> dict[str, Any]:
    for dotted, value in paths:
        *parents, last = dotted.split(".")
        here: Any = config
        for part in parents:
            here = here[int(part)] if part.isdigit() else here[part]
        if value is None:
            del here[last]
        else:
            here[last] = value
    return config


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("clusters: [", r"not valid YAML \(line \d+\): fix the file"),
        ("- a\n- b\n", "is a mapping"),
        ({"apiVersion": "v1", "kind": "Config"}, "has no contexts"),
        (_config({"u": {}}, current=None), r"no current context .*--context NAME \(its contexts: u\)"),
        (_config({"u": {}}, current="nope"), "no context 'nope' \\(current-context\\); its contexts: u"),
        (_broken(_config({"u": {}}), ("contexts.0.context.cluster", "gone")), "contexts\\[u\\].cluster names 'gone'"),
        (_broken(_config({"u": {}}), ("contexts.0.context.cluster", None)), "contexts\\[u\\].cluster is not set"),
        (_broken(_config({"u": {}}), ("contexts.0.context.user", "gone")), "contexts\\[u\\].user names 'gone'"),
        (_broken(_config({"u": {}}), ("clusters.0.cluster.server", None)), "clusters\\[c\\].server is not set"),
        (_broken(_config({"u": {}}), ("clusters.0.cluster.server", 6443)), "server must be a string"),
        (_broken(_config({"u": {}}), ("clusters", {"c": 1})), "clusters must be a list"),
        (_broken(_config({"u": {}}), ("users.0.name", None)), "users\\[0\\] has no name"),
        (_config({"u": {"client-certificate-data": base64.b64encode(CA.encode()).decode()}}), "has a client-certificate but no client-key"),
        (_config({"u": {"client-key": "/no/such/key", "client-certificate": "/no/such/crt"}}), "users\\[u\\].client-certificate in .*: /no/such/crt: no such file"),
        (_config({"u": {}}, cluster={"server": "https://x", "certificate-authority-data": "not base64!"}), "certificate-authority-data is not base64 of PEM"),
        (_config({"u": {"tokenFile": "missing-token"}}), "users\\[u\\].tokenFile .*missing-token: no such file"),
        (_config({"u": {"auth-provider": {"name": "gcp", "config": {}}}}), "'gcp' is not supported .*exec plugin"),
        (_config({"u": {"client-certificate-data": CA, "client-key-data": CA}}), "client certificate and key of user 'u' .* cannot be used"),
    ],
)  # fmt: skip
def test_a_kubeconfig_that_cannot_be_used_says_where_and_what_to_do(
    tmp_path: Path, config: str | dict[str, Any], message: str
) -> None:
    path = tmp_path / "kc"
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    with pytest.raises(CredentialsError, match=message) as error:
        connection(str(path))
    assert str(path) in str(error.value)


def test_no_kubeconfig_and_no_pod_says_how_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    with pytest.raises(CredentialsError, match=r"no such file, and not in a pod .*set KUBECONFIG"):
        connection(None, service_account=tmp_path / "no-account")
    with pytest.raises(CredentialsError, match="no such file: give --kubeconfig"):
        connection(str(tmp_path / "nowhere"))


def test_an_oidc_id_token_is_the_bearer(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc", "config": {"id-token": "jwt", "idp-issuer-url": "x"}}}
    path = _write(tmp_path / "kc", _config({"u": user}))
    assert read(choose(str(path))).authorization == "Bearer jwt"
