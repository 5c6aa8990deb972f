"""Fixtures for the tests of the operator's parts run in-process on the real API server.

- ``client`` (function): our KubeClient (http1.py) as admin, closed after the test.
- ``parts`` (function): an operator's parts wired in-process with their informers
  running (testkit/operator_parts.py), for the reconciler's tests on the real API server;
  ``fake_parts`` the same on the in-memory API (namespace "default").
- ``api`` (function): an in-memory API server (testkit/fake_api.py) with the namespace
  "default", for tests of the shell's logic that need a client but no etcd;
  ``api.client()`` is the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from testkit.fake_api import FakeApi
from testkit.operator_parts import OperatorParts
from tfjob.runtimes.kubernetes.transport.client import KubeClient


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    connected = KubeClient.connect(str(kubeconfig))
    yield connected
    await connected.close()


@pytest.fixture
async def parts(
    client: KubeClient, namespace: str, crd_installed: Any
) -> AsyncIterator[OperatorParts]:
    built = OperatorParts(client, namespace)
    await built.informers()
    yield built
    await built.stop()


@pytest.fixture
def api() -> FakeApi:
    return FakeApi(namespaces=["default"])


@pytest.fixture
async def fake_parts(api: FakeApi) -> AsyncIterator[OperatorParts]:
    built = OperatorParts(api.client(), "default")  # type: ignore[arg-type]
    await built.informers()
    yield built
    await built.stop()
