"""Gate for the XGBoost suite: it needs a `python3` that imports xgboost with its
collective and tracker (testkit/python_gate.py)."""

from __future__ import annotations

import pytest

from testkit.python_gate import require, unusable


@pytest.fixture(scope="session")
def xgboost_check() -> str | None:
    """None if `python3` on PATH imports xgboost's collective, else why not."""
    return unusable("import xgboost.collective, xgboost.tracker", "xgboost")


# Module scope: it must come before the module-scoped fixtures that run xgboost.
@pytest.fixture(autouse=True, scope="module")
def _require_xgboost(xgboost_check: str | None) -> None:
    require(xgboost_check)
