"""Gate for the PaddlePaddle suite: it needs a `python3` that imports paddle and its
launcher (testkit/python_gate.py)."""

from __future__ import annotations

import pytest

from testkit.python_gate import require, unusable


@pytest.fixture(scope="session")
def paddle_check() -> str | None:
    """None if `python3` on PATH imports paddle.distributed.launch, else why not."""
    return unusable("import paddle.distributed.launch", "paddle")


# Module scope: it must come before the module-scoped fixtures that run paddle.
@pytest.fixture(autouse=True, scope="module")
def _require_paddle(paddle_check: str | None) -> None:
    require(paddle_check)
