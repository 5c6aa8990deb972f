"""Fixtures for the local runtime's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from testkit.local_harness import Harness


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path, addresses={"worker": ["127.0.0.1:40001", "127.0.0.1:40002"]})
    try:
        yield h
    finally:
        await h.kubelet.shutdown()
