"""Credentials as a user gives them - kubeconfig tokens, token files, exec plugins,
client certificates, contexts, in-cluster service accounts, TLS - used against the real
API server (it takes static tokens and certificates signed by the test CA).
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from testkit.controlplane import ControlPlane
from tfjob.runtimes.kubernetes import credentials
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.credentials import Connection, CredentialsError, connection

STALE = "stale-token-the-api-server-does-not-know"


def _kubeconfig(
    path: Path,
    plane: ControlPlane,
    users: dict[str, dict[str, Any]],
    *,
    current: str | None,
    namespaces: dict[str, str] | None = None,
    cluster: dict[str, Any] | None = None,
) -> str:
    ca = base64.b64encode(plane.ca_path.read_bytes()).decode()
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": cluster or {"server": plane.server, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [
            {
                "name": name,
                "context": {
                    "cluster": "c",
                    "user": name,
                    "namespace": (namespaces or {}).get(name, "default"),
                },
            }
            for name in users
        ],
    }
    if current:
        config["current-context"] = current
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def _namespace_name(conn: Connection) -> str:
    """GET a namespace through our client: fails unless the credentials work."""
    client = KubeClient.from_connection(conn)
    try:
        body = await client.get_path("/api/v1/namespaces/default")
    finally:
        await client.close()
    return str(msgspec.json.decode(body)["metadata"]["name"])


def _exec_plugin(folder: Path, token_file: Path) -> dict[str, Any]:
    """An exec plugin printing the token held in `token_file` at the time it runs; each
    run adds a line to folder/runs."""
    script = folder / "plugin.py"
    script.write_text(
        "import json, sys\n"
        f"open({str(folder / 'runs')!r}, 'a').write('run\\n')\n"
        f"token = open({str(token_file)!r}).read().strip()\n"
        "json.dump({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': {'token': token}}, sys.stdout)\n"
    )
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script)],
            "interactiveMode": "Never",
        }
    }


async def test_bearer_token_and_context_namespace(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = _kubeconfig(
        tmp_path / "kc",
        control_plane,
        {"admin": {"token": control_plane.token}},
        current="admin",
        namespaces={"admin": "team-a"},
    )
    conn = connection(path)
    assert conn.namespace == "team-a"
    assert await _namespace_name(conn) == "default"


async def test_token_file_is_read_again_after_a_401(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(STALE)
    path = _kubeconfig(
        tmp_path / "kc", control_plane, {"u": {"tokenFile": str(token_file)}}, current="u"
    )
    conn = connection(path)
    token_file.write_text(control_plane.token + "\n")  # rotated after we loaded it
    assert await _namespace_name(conn) == "default"


async def test_exec_plugin_runs_again_after_a_401(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(STALE)
    path = _kubeconfig(
        tmp_path / "kc", control_plane, {"u": _exec_plugin(tmp_path, token_file)}, current="u"
    )
    conn = connection(path)
    token_file.write_text(control_plane.token)
    assert await _namespace_name(conn) == "default"


async def test_401s_in_flight_together_share_one_reload(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Each reload is a child process running the plugin: eight requests answered 401
    at once run it once, and all eight then succeed with the new token."""
    token_file = tmp_path / "token"
    token_file.write_text(STALE)
    path = _kubeconfig(
        tmp_path / "kc", control_plane, {"u": _exec_plugin(tmp_path, token_file)}, current="u"
    )
    conn = connection(path)
    token_file.write_text(control_plane.token)
    client = KubeClient.from_connection(conn)
    try:
        bodies = await asyncio.gather(
            *(client.get_path("/api/v1/namespaces/default") for _ in range(8))
        )
    finally:
        await client.close()
    assert len(bodies) == 8
    assert (tmp_path / "runs").read_text().count("run") == 2  # the first load, one reload


async def test_a_401_soon_after_a_reload_that_changed_nothing_starts_no_other(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(STALE)  # and it stays stale
    path = _kubeconfig(
        tmp_path / "kc", control_plane, {"u": _exec_plugin(tmp_path, token_file)}, current="u"
    )
    conn = connection(path)
    for _ in range(3):
        with pytest.raises(ApiError) as error:
            await _namespace_name(conn)
        assert error.value.code == 401
    assert (tmp_path / "runs").read_text().count("run") == 2  # the first load, one reload


async def test_a_failing_exec_plugin_is_a_credentials_error(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "false"}}
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u")
    with pytest.raises(CredentialsError, match="exec"):
        connection(path)


async def test_bad_credentials_that_do_not_change_are_not_retried_forever(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": {"token": STALE}}, current="u")
    with pytest.raises(ApiError) as error:
        await _namespace_name(connection(path))
    assert error.value.code == 401


async def test_context_picks_another_user_and_namespace(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    users = {"bad": {"token": STALE}, "good": {"token": control_plane.token}}
    path = _kubeconfig(
        tmp_path / "kc", control_plane, users, current="bad", namespaces={"good": "team-b"}
    )
    conn = connection(path, context="good")
    assert conn.namespace == "team-b"
    assert await _namespace_name(conn) == "default"
    with pytest.raises(CredentialsError, match="nope"):
        connection(path, context="nope")


def test_a_kubeconfig_without_current_context_needs_one(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": {"token": "t"}}, current=None)
    with pytest.raises(CredentialsError, match="current context"):
        connection(path)


async def test_in_cluster_service_account(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(STALE)
    (account / "ca.crt").write_bytes(control_plane.ca_path.read_bytes())
    (account / "namespace").write_text("team-c")
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    conn = connection(None, service_account=account)
    assert conn.namespace == "team-c"
    (account / "token").write_text(control_plane.token)  # the kubelet rotated it
    assert await _namespace_name(conn) == "default"


async def test_in_cluster_the_rotated_token_is_read_without_waiting_for_a_401(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet rotates the token file in place; the operator reads it again every
    minute by itself (here: at once), with no child process and no 401."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(STALE)
    (account / "ca.crt").write_bytes(control_plane.ca_path.read_bytes())
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    conn = connection(None, service_account=account)
    (account / "token").write_text(control_plane.token + "\n")
    assert await conn.credentials.header() == f"Bearer {STALE}"  # within the minute
    monkeypatch.setattr(credentials, "TOKEN_REREAD", 0.0)
    assert await conn.credentials.header() == f"Bearer {control_plane.token}"


async def test_the_server_certificate_is_verified(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca"
    other_ca.mkdir()
    ca = _foreign_ca(other_ca)
    cluster = {"server": control_plane.server, "certificate-authority": str(ca)}
    path = _kubeconfig(
        tmp_path / "kc",
        control_plane,
        {"u": {"token": control_plane.token}},
        current="u",
        cluster=cluster,
    )
    with pytest.raises(TransportError, match="certificate"):
        await _namespace_name(connection(path))
    insecure = {"server": control_plane.server, "insecure-skip-tls-verify": True}
    path = _kubeconfig(
        tmp_path / "kc2",
        control_plane,
        {"u": {"token": control_plane.token}},
        current="u",
        cluster=insecure,
    )
    assert await _namespace_name(connection(path)) == "default"


def _client_certificate(plane: ControlPlane, folder: Path) -> tuple[Path, Path]:
    """A client certificate the API server accepts: signed by its CA, in system:masters."""
    key, certificate = folder / "client.key", folder / "client.crt"
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to sign a client certificate")
    subject = "/O=system:masters/CN=tfjob-certificate-user"
    steps = [
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj", subject,
         "-out", str(folder / "client.csr")],
        ["x509", "-req", "-in", str(folder / "client.csr"), "-CA", str(plane.ca_path),
         "-CAkey", str(plane.ca_key_path), "-CAcreateserial", "-days", "1",
         "-out", str(certificate)],
    ]  # fmt: skip
    for step in steps:
        subprocess.run(["openssl", *step], check=True, capture_output=True, cwd=folder)
    return certificate, key


def _pem_data(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def test_inline_client_certificate_leaves_no_file_behind(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader writes inline data to temporary files (deleted when it exits): the
    contents reach the TLS context, and neither its files nor ours stay on disk."""
    certificate, key = _client_certificate(control_plane, tmp_path)
    user = {"client-certificate-data": _pem_data(certificate), "client-key-data": _pem_data(key)}
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))  # the loader's, in its process
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # ours
    conn = connection(path)
    assert list(temporary.iterdir()) == []
    assert await conn.credentials.header() is None  # the certificate alone authenticates
    assert await _namespace_name(conn) == "default"


async def test_client_certificate_files_relative_to_the_kubeconfig(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    certificate, key = _client_certificate(control_plane, tmp_path)
    user = {"client-certificate": certificate.name, "client-key": key.name}
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u")
    assert await _namespace_name(connection(path)) == "default"


async def test_exec_plugin_answering_with_a_client_certificate(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    certificate, key = _client_certificate(control_plane, tmp_path)
    script = tmp_path / "cert-plugin.py"
    script.write_text(
        "import json, sys\n"
        f"status = {{'clientCertificateData': open({str(certificate)!r}).read(),"
        f" 'clientKeyData': open({str(key)!r}).read()}}\n"
        "json.dump({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': status}, sys.stdout)\n"
    )
    plugin = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script)],
            "interactiveMode": "Never",
        }
    }
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": plugin}, current="u")
    assert await _namespace_name(connection(path)) == "default"


def test_the_calling_process_never_imports_kubernetes_asyncio(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The loader runs in a child: the operator's modules and a connection built and
    used from a kubeconfig leave the library out of the calling process."""
    path = _kubeconfig(
        tmp_path / "kc", control_plane, {"admin": {"token": control_plane.token}}, current="admin"
    )
    program = (
        "import asyncio, sys\n"
        "import tfjob.runtimes.kubernetes.operator, tfjob.interfaces.cluster\n"
        "from tfjob.runtimes.kubernetes.client import KubeClient\n"
        "async def main():\n"
        f"    client = KubeClient.connect({path!r})\n"
        "    try:\n"
        "        await client.get_path('/api/v1/namespaces/default')\n"
        "    finally:\n"
        "        await client.close()\n"
        "asyncio.run(main())\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes_asyncio', 'urllib3'}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_child_imports_the_loader_without_the_generated_client(tmp_path: Path) -> None:
    """The child's start is what the operator waits for: the loader comes without the
    768 model modules, and a name only the whole package has still resolves."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kc").write_text(yaml.safe_dump(config))
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tfjob.runtimes.kubernetes import kubeconfig_child as child\n"
        "child.import_loader_alone()\n"
        f"found = child.answer({str(tmp_path / 'kc')!r}, None, Path('/nowhere'))\n"
        "print(found.authorization)\n"
        "print(sum(m.startswith('kubernetes_asyncio.client.models.') for m in sys.modules))\n"
        "import kubernetes_asyncio.client\n"
        "print(kubernetes_asyncio.client.V1Pod.__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["Bearer", "t", "0", "V1Pod"]


def test_an_unusable_kubeconfig_says_why(tmp_path: Path) -> None:
    """The child's errors come back as the same one-line CredentialsError."""
    with pytest.raises(CredentialsError, match="no such file"):
        connection(str(tmp_path / "nowhere"))
    (tmp_path / "empty").write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(CredentialsError, match="has no contexts"):
        connection(str(tmp_path / "empty"))
    (tmp_path / "broken").write_text("clusters: [")
    with pytest.raises(CredentialsError):
        connection(str(tmp_path / "broken"))


def _foreign_ca(folder: Path) -> Path:
    """A CA that did not sign the API server's certificate."""
    from testkit.controlplane import _Certificates

    certs = _Certificates(folder)
    certs.generate()
    return certs.ca_cert
