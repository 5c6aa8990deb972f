"""The core and the API read no clock and no environment (import-linter forbids the
I/O modules; this catches what it cannot: clock reads through datetime)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCES = sorted(
    p
    for package in ("core", "api")
    for p in (Path(__file__).parents[2] / "src" / "tfjob" / package).glob("*.py")
)
FORBIDDEN_CALLS = {"now", "utcnow", "today", "getenv", "time", "monotonic", "random"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_clock_or_environment_reads(path: Path) -> None:
    tree = ast.parse(path.read_text())
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & FORBIDDEN_CALLS, f"{path.name} calls {calls & FORBIDDEN_CALLS}"
