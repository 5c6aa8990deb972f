"""The operator's HTTP/1.1 client (transport/http1.py) under KubeClient, on a real API
server, directly or through the fault proxy (testkit/fault_proxy.py), which counts the
connections the client holds and closes or drops them on demand.

One case cannot be had from a real API server: an answer that starts and then goes
silent without the connection closing. It is played by a small asyncio server in the
test (`_silent_watch_server`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest
import yaml

from testkit.controlplane import ControlPlane
from testkit.fault_proxy import FaultProxy, Rule, token_of
from testkit.helpers import until
from tfjob.runtimes.kubernetes.transport import client as client_module
from tfjob.runtimes.kubernetes.transport.client import (
    KubeClient,
    RequestTimeout,
    TransportError,
)
from tfjob.runtimes.kubernetes.transport.credentials import connection
from tfjob.runtimes.kubernetes.transport.http1 import Origin, Pool
from tfjob.runtimes.kubernetes.transport.resources import Resource

pytestmark = pytest.mark.controlplane

CONFIG_MAPS = Resource("", "v1", "configmaps")


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=control_plane.server, ca=control_plane.ca_path) as faulty:
        yield faulty


@pytest.fixture
async def proxied(proxy: FaultProxy, kubeconfig: Path, tmp_path: Path) -> AsyncIterator[KubeClient]:
    path = proxy.write_kubeconfig(tmp_path / "proxied", token=token_of(kubeconfig))
    through = KubeClient.connect(str(path))
    yield through
    await through.close()


def _config_map(name: str, size: int = 10) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"a": "x" * size}}


async def test_lists_and_watches_read_gzip_and_chunked_answers(
    kubeconfig: Path, namespace: str
) -> None:
    """A list over 128 KB comes gzipped (the API server compresses those), in pages
    that each decode; a watch's chunked stream yields each event as it happens."""
    client = KubeClient.connect(str(kubeconfig))
    try:
        for i in range(16):  # 16 x 10 KB: a 160 KB list
            await client.create(CONFIG_MAPS, namespace, _config_map(f"big-{i}", 10_000))
        pages = [
            json.loads(page) async for page in client.list_pages(CONFIG_MAPS, namespace, limit=12)
        ]
        names = [[item["metadata"]["name"] for item in page["items"]] for page in pages]
        assert len(names[0]) == 12 and len(pages) == 2
        assert sorted(name for page in names for name in page) == sorted(
            f"big-{i}" for i in range(16)
        )

        # The whole list asked for by hand: it does come gzipped.
        auth = await connection(str(kubeconfig)).credentials.auth()
        pool = Pool()
        origin = Origin.parse(client.server)
        target = f"/api/v1/namespaces/{namespace}/configmaps"
        headers = {**auth.headers, "Accept-Encoding": "gzip"}
        answer = await pool.open("GET", origin, target, headers, tls=auth.tls)
        try:
            assert answer.status == 200
            assert answer.headers["content-encoding"] == "gzip"
            assert len(json.loads(await answer.read())["items"]) == 16
        finally:
            answer.release()
        await pool.close()

        listed = json.loads(await client.list(CONFIG_MAPS, namespace, limit=1))
        version = listed["metadata"]["resourceVersion"]
        events = client.watch(CONFIG_MAPS, namespace, resource_version=version)
        await client.create(CONFIG_MAPS, namespace, _config_map("watched-0"))
        first = json.loads(await anext(events))
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "watched-0")
        await client.create(CONFIG_MAPS, namespace, _config_map("watched-1"))
        second = json.loads(await anext(events))
        assert second["object"]["metadata"]["name"] == "watched-1"
        await events.aclose()
    finally:
        await client.close()


async def test_connections_the_server_closed_or_dropped_are_not_errors(
    proxy: FaultProxy, proxied: KubeClient, namespace: str
) -> None:
    """A keep-alive connection the server closed while idle (its idle timeout) is
    not used again; a read dropped without an answer on a connection that had served
    is sent again on a new one; a write dropped so is an error (the server may have
    carried it out), and nothing was written twice."""
    await proxied.create(CONFIG_MAPS, namespace, _config_map("before"))
    made = proxy.connections_made
    assert proxy.close_idle_connections() == 1
    await until(lambda: proxy.open_connections == 0)
    await asyncio.sleep(0.05)  # the closing FIN reaches the client's event loop
    await proxied.create(CONFIG_MAPS, namespace, _config_map("after-close"))
    assert proxy.connections_made == made + 1

    proxy.set_rules(Rule("reset-before", times=1))
    read = msgspec.json.decode(await proxied.get(CONFIG_MAPS, namespace, "after-close"))
    assert read["metadata"]["name"] == "after-close"
    assert proxy.injected["reset-before"] == 1
    assert proxy.connections_made == made + 2

    proxy.set_rules(Rule("reset-after", times=1))
    with pytest.raises(TransportError):
        await proxied.create(CONFIG_MAPS, namespace, _config_map("dropped"))
    # Answered: "before" and "after-close"; "dropped" was carried out, never answered,
    # and not sent again (again, it would have been answered 409 AlreadyExists).
    assert proxy.requests["POST configmaps"] == 2
    assert await proxied.get(CONFIG_MAPS, namespace, "dropped")


async def test_at_most_64_connections_are_open_at_once(
    proxy: FaultProxy, proxied: KubeClient, namespace: str
) -> None:
    """150 requests at once, each held 0.3 s by the server: all answered, on at most
    64 connections (the ones beyond wait their turn), which are then reused."""
    proxy.set_rules(Rule("delay", delay=0.3, match=lambda method, _path: method == "GET"))
    answers = await asyncio.gather(
        *(proxied.get_path(f"/api/v1/namespaces/{namespace}") for _ in range(150))
    )
    assert len(answers) == 150
    assert proxy.most_connections == 64
    assert proxy.connections_made == 64


async def test_a_connection_idle_past_its_limit_is_closed_and_a_busy_one_kept(
    proxy: FaultProxy, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    """An operator gone quiet does not hold the API server's sockets: a connection
    idle for `idle_seconds` is closed with no request to prompt it, one in steady use
    is kept, and the next request after the close opens a new one."""
    path = proxy.write_kubeconfig(tmp_path / "proxied", token=token_of(kubeconfig))
    conn = connection(str(path))
    client = KubeClient(conn.server, Pool(8, idle_seconds=0.6), conn.credentials)
    target = f"/api/v1/namespaces/{namespace}"
    try:
        for _ in range(6):  # 1.2 s in all, never 0.6 s idle
            await client.get_path(target)
            await asyncio.sleep(0.2)
        assert (proxy.connections_made, proxy.open_connections) == (1, 1)
        await until(lambda: proxy.open_connections == 0, within=3)
        await client.get_path(target)
        assert proxy.connections_made == 2
    finally:
        await client.close()


async def _silent_watch_server(event: bytes) -> asyncio.Server:
    """Answers any request with a chunked 200 and one chunk, then says nothing more."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(event), event)
        )
        await reader.read()  # until the client goes
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


async def test_a_watch_that_goes_silent_ends_with_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch whose connection stays open but carries nothing past its timeout plus
    WATCH_SILENCE is taken for dead: RequestTimeout, after the events it did carry."""
    monkeypatch.setattr(client_module, "WATCH_SILENCE", 0.3)
    event = b'{"type":"ADDED","object":{}}\n'
    server = await _silent_watch_server(event)
    port = server.sockets[0].getsockname()[1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(config))
    client = KubeClient.connect(str(tmp_path / "config"))
    lines = []
    try:
        with pytest.raises(RequestTimeout, match="watch went silent"):
            async for line in client.watch(
                CONFIG_MAPS, "default", resource_version="1", timeout_seconds=0
            ):
                lines.append(line)
    finally:
        await client.close()
        server.close()
    assert lines == [event.strip()]
