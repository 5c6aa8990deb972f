"""Credentials as a user gives them - kubeconfig tokens, token files, exec plugins,
client certificates, contexts, in-cluster service accounts, TLS - used against the real
API server (it takes static tokens and certificates signed by the test CA), and picked
up again while the client runs: rotated files, expiring exec credentials, 401s.
(tests/kubernetes/test_kubeconfig.py reads kubeconfigs without an API server.)
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

from testkit.controlplane import OPERATOR_USER, ControlPlane
from tfjob.runtimes.kubernetes.transport import credentials
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.credentials import Connection, CredentialsError, connection
from tfjob.runtimes.kubernetes.transport.resources import Resource

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


def _exec_plugin(
    folder: Path, token_file: Path, *, expires_in: float | None = None
) -> dict[str, Any]:
    """An exec plugin printing the token held in `token_file` at the time it runs,
    expiring `expires_in` seconds later if given; each run adds a line to folder/runs."""
    status = f"{{'token': open({str(token_file)!r}).read().strip()}}"
    return _plugin_stanza(folder, "plugin.py", status, expires_in)


def _certificate_plugin(
    folder: Path, certificate: Path, key: Path, *, expires_in: float
) -> dict[str, Any]:
    """An exec plugin answering with the client certificate and key in these files."""
    status = (
        f"{{'clientCertificateData': open({str(certificate)!r}).read(),"
        f" 'clientKeyData': open({str(key)!r}).read()}}"
    )
    return _plugin_stanza(folder, "cert-plugin.py", status, expires_in)


def _plugin_stanza(
    folder: Path, name: str, status: str, expires_in: float | None
) -> dict[str, Any]:
    script = folder / name
    script.write_text(
        "import datetime, json, sys\n"
        f"open({str(folder / 'runs')!r}, 'a').write('run\\n')\n"
        f"status = {status}\n"
        f"if {expires_in!r} is not None:\n"
        "    at = datetime.datetime.now(datetime.timezone.utc)"
        f" + datetime.timedelta(seconds={expires_in!r} or 0)\n"
        "    status['expirationTimestamp'] = at.strftime('%Y-%m-%dT%H:%M:%SZ')\n"
        "json.dump({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        " 'status': status}, sys.stdout)\n"
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


def _connection_whose_plugin_token_rotated(plane: ControlPlane, tmp_path: Path) -> Connection:
    """A connection loaded with an exec plugin's stale token; by now the plugin would
    print the valid one (its runs are counted in tmp_path / "runs")."""
    token_file = tmp_path / "token"
    token_file.write_text(STALE)
    path = _kubeconfig(
        tmp_path / "kc", plane, {"u": _exec_plugin(tmp_path, token_file)}, current="u"
    )
    conn = connection(path)
    token_file.write_text(plane.token)
    return conn


async def test_exec_plugin_runs_again_after_a_401(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    conn = _connection_whose_plugin_token_rotated(control_plane, tmp_path)
    assert await _namespace_name(conn) == "default"


async def test_401s_in_flight_together_share_one_reload(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Each reload runs the plugin: eight requests answered 401 at once run it once,
    and all eight then succeed with the new token."""
    conn = _connection_whose_plugin_token_rotated(control_plane, tmp_path)
    client = KubeClient.from_connection(conn)
    try:
        bodies = await asyncio.gather(
            *(client.get_path("/api/v1/namespaces/default") for _ in range(8))
        )
    finally:
        await client.close()
    assert len(bodies) == 8
    assert (tmp_path / "runs").read_text().count("run") == 2  # the first load, one reload


async def test_a_401_answered_after_another_requests_reload_retries_with_the_new_token(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Of requests sent together with the stale token, one whose 401 comes back after
    another's reload has replaced the token retries with it, without running the plugin
    again (it used to fail: the reload counted as one that changed nothing)."""
    conn = _connection_whose_plugin_token_rotated(control_plane, tmp_path)
    sent = await conn.credentials.auth()  # what both requests carried
    assert await conn.credentials.refresh(sent)  # the first 401: the plugin runs
    assert await conn.credentials.refresh(sent)  # the late one: retry, no second run
    assert (await conn.credentials.auth()).authorization == f"Bearer {control_plane.token}"
    assert (tmp_path / "runs").read_text().count("run") == 2  # the first load, one reload
    assert await _namespace_name(conn) == "default"


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
    """The kubelet rotates the token file in place; the client looks at it again every
    FILE_CHECK seconds by itself (here: at once) and sends the new token, no 401."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(control_plane.token)
    (account / "ca.crt").write_bytes(control_plane.ca_path.read_bytes())
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    client = KubeClient.from_connection(connection(None, service_account=account))
    statuses = _statuses(client)
    try:
        assert await _whoami(client) == "admin"
        (account / "token").write_text(control_plane.operator_token + "\n")
        assert await _whoami(client) == "admin"  # looked at every FILE_CHECK seconds
        monkeypatch.setattr(credentials, "FILE_CHECK", 0.0)
        assert await _whoami(client) == OPERATOR_USER
    finally:
        await client.close()
    assert 401 not in statuses


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


async def test_a_kubeconfig_naming_no_ca_trusts_the_systems_cas(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No CA in the kubeconfig: the server is verified against the system's CAs
    (here the file SSL_CERT_FILE names, holding the control plane's CA), not by a
    context without any."""
    monkeypatch.setenv("SSL_CERT_FILE", str(control_plane.ca_path))
    path = _kubeconfig(
        tmp_path / "kc",
        control_plane,
        {"u": {"token": control_plane.token}},
        current="u",
        cluster={"server": control_plane.server},
    )
    assert await _namespace_name(connection(path)) == "default"


def _client_certificate(
    plane: ControlPlane,
    folder: Path,
    user: str = "tfjob-certificate-user",
    *,
    ca: tuple[Path, Path] | None = None,
) -> tuple[Path, Path]:
    """A client certificate for `user` in system:masters, signed by the API server's
    CA (which it accepts) unless `ca` (certificate, key) names another."""
    folder.mkdir(parents=True, exist_ok=True)
    key, certificate = folder / f"{user}.key", folder / f"{user}.crt"
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to sign a client certificate")
    ca_certificate, ca_key = ca or (plane.ca_path, plane.ca_key_path)
    subject = f"/O=system:masters/CN={user}"
    steps = [
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj", subject,
         "-out", str(folder / "client.csr")],
        ["x509", "-req", "-in", str(folder / "client.csr"), "-CA", str(ca_certificate),
         "-CAkey", str(ca_key), "-CAcreateserial", "-days", "1",
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
    """ssl loads a certificate only from a file: inline data reaches the TLS context
    through a temporary file that is gone once it is loaded."""
    certificate, key = _client_certificate(control_plane, tmp_path)
    user = {"client-certificate-data": _pem_data(certificate), "client-key-data": _pem_data(key)}
    path = _kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
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


async def test_a_rotated_client_certificate_file_is_used_without_a_restart(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cert-manager or a script replaces the certificate and key files: the next
    request after the client looks at them (every FILE_CHECK seconds; here at once)
    presents the new certificate - another user to the API server - with no 401."""
    alice = _client_certificate(control_plane, tmp_path / "alice", "alice")
    bob = _client_certificate(control_plane, tmp_path / "bob", "bob")
    certificate, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(alice, certificate, key)
    user = {"client-certificate": str(certificate), "client-key": str(key)}
    client = KubeClient.from_connection(
        connection(_kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u"))
    )
    statuses = _statuses(client)
    try:
        assert await _whoami(client) == "alice"
        _install(bob, certificate, key)
        assert await _whoami(client) == "alice"  # within FILE_CHECK seconds
        monkeypatch.setattr(credentials, "FILE_CHECK", 0.0)
        assert await _whoami(client) == "bob"
        assert await _whoami(client) == "bob"
    finally:
        await client.close()
    assert 401 not in statuses


async def test_a_refused_client_certificate_is_read_again_after_the_401(
    control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate the API server does not trust (signed by another CA) gets a 401;
    the client reads the files again then, and the request is retried with the
    rotated certificate - though the files were not looked at on a schedule here."""
    monkeypatch.setattr(credentials, "FILE_CHECK", 3600.0)
    monkeypatch.setattr(credentials, "RELOAD_SPACING", 0.0)
    foreign = _foreign_ca(tmp_path / "other-ca")
    untrusted = _client_certificate(
        control_plane, tmp_path / "old", "carol", ca=(foreign, foreign.with_name("ca.key"))
    )
    trusted = _client_certificate(control_plane, tmp_path / "new", "carol")
    certificate, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(untrusted, certificate, key)
    user = {"client-certificate": str(certificate), "client-key": str(key)}
    conn = connection(_kubeconfig(tmp_path / "kc", control_plane, {"u": user}, current="u"))
    client = KubeClient.from_connection(conn)
    statuses = _statuses(client)
    try:
        with pytest.raises(ApiError) as refused:
            await _whoami(client)  # read again after the 401: the same certificate
        assert refused.value.code == 401
        _install(trusted, certificate, key)
        assert await _whoami(client) == "carol"
    finally:
        await client.close()
    assert statuses == [401, 401, 201]


async def test_an_expiring_exec_token_is_renewed_without_a_restart(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """An exec plugin's token says it expires in 3 s: shortly before then the client
    runs the plugin again, by itself (no 401), and sends the token it gets now."""
    token_file = tmp_path / "token"
    token_file.write_text(control_plane.token)
    plugin = _exec_plugin(tmp_path, token_file, expires_in=3.0)
    client = KubeClient.from_connection(
        connection(_kubeconfig(tmp_path / "kc", control_plane, {"u": plugin}, current="u"))
    )
    statuses = _statuses(client)
    try:
        assert await _whoami(client) == "admin"
        token_file.write_text(control_plane.operator_token)
        assert await _whoami(client) == "admin"  # not expiring yet: the same token
        await asyncio.sleep(3.0)
        assert await _whoami(client) == OPERATOR_USER
    finally:
        await client.close()
    assert 401 not in statuses
    assert (tmp_path / "runs").read_text().count("run") == 2


async def test_an_expiring_exec_client_certificate_is_renewed_without_a_restart(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The same for a plugin answering with a client certificate: the renewed one is
    presented on the connections opened after the renewal."""
    dave = _client_certificate(control_plane, tmp_path / "dave", "dave")
    erin = _client_certificate(control_plane, tmp_path / "erin", "erin")
    certificate, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(dave, certificate, key)
    plugin = _certificate_plugin(tmp_path, certificate, key, expires_in=3.0)
    client = KubeClient.from_connection(
        connection(_kubeconfig(tmp_path / "kc", control_plane, {"u": plugin}, current="u"))
    )
    try:
        assert await _whoami(client) == "dave"
        _install(erin, certificate, key)
        await asyncio.sleep(3.0)
        assert await _whoami(client) == "erin"
    finally:
        await client.close()


def _install(pair: tuple[Path, Path], certificate: Path, key: Path) -> None:
    """Replace the files as a rotation does: each written whole, then renamed over."""
    for source, target in zip(pair, (certificate, key), strict=True):
        staged = target.with_suffix(".new")
        staged.write_bytes(source.read_bytes())
        staged.replace(target)


def _statuses(client: KubeClient) -> list[int]:
    """Every status code the client got, in order."""
    seen: list[int] = []
    client.on_response = lambda _method, code: seen.append(code)
    return seen


SELF_SUBJECT_REVIEWS = Resource("authentication.k8s.io", "v1", "selfsubjectreviews")


async def _whoami(client: KubeClient) -> str:
    """Who the API server says the client is (a SelfSubjectReview)."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    body = await client.create(SELF_SUBJECT_REVIEWS, "", review)
    return str(msgspec.json.decode(body)["status"]["userInfo"]["username"])


def _foreign_ca(folder: Path) -> Path:
    """A CA that did not sign the API server's certificate."""
    from testkit.controlplane import _Certificates

    certs = _Certificates(folder)
    certs.generate()
    return certs.ca_cert
