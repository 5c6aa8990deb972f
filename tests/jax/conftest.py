"""Gate for the JAX suite: it needs a `python3` that imports jax (testkit/python_gate.py)."""

from __future__ import annotations

import pytest

from testkit.python_gate import require, unusable


@pytest.fixture(scope="session")
def jax_check() -> str | None:
    """None if `python3` on PATH imports jax, else why not."""
    return unusable("import jax, jax.distributed", "jax")


# Module scope: it must come before the module-scoped fixtures that run jax.
@pytest.fixture(autouse=True, scope="module")
def _require_jax(jax_check: str | None) -> None:
    require(jax_check)
