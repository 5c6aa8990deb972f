"""Credentials as a user gives them - kubeconfig tokens, token files, exec plugins,
contexts, in-cluster service accounts, TLS - used against the real API server.

The API server here accepts static bearer tokens only (no client-CA), so client
certificates are not exercised against it; the TLS tests check the server side.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tests.support.controlplane import ControlPlane
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
    """An exec plugin printing the token held in `token_file` at the time it runs."""
    script = folder / "plugin.py"
    script.write_text(
        "import json, sys\n"
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


def _foreign_ca(folder: Path) -> Path:
    """A CA that did not sign the API server's certificate."""
    from tests.support.controlplane import _Certificates

    certs = _Certificates(folder)
    certs.generate()
    return certs.ca_cert
