"""The TrainJob core and the mlPolicy handlers read no clock, environment or
randomness and generate no keys: `now` and the MPI key pair come from the caller.
(import-linter forbids the I/O modules; this also catches datetime's clock and the
modules of randomness and cryptography.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src" / "tfjob"
SOURCES = sorted(
    [*(SRC / "core" / "trainjob").glob("*.py"), *(SRC / "frameworks" / "mlpolicy").glob("*.py")]
)
FORBIDDEN_CALLS = {
    "now",
    "utcnow",
    "today",
    "getenv",
    "time",
    "monotonic",
    "random",
    "urandom",
    "token_bytes",
}
FORBIDDEN_MODULES = {
    "os",
    "time",
    "random",
    "secrets",
    "uuid",
    "cryptography",
    "hashlib",
    "ssl",
    "subprocess",
}


def test_the_sources_are_found() -> None:
    assert {p.name for p in SOURCES} >= {"jobset.py", "reconcile.py", "mpi.py", "torch.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_clock_environment_or_randomness(path: Path) -> None:
    tree = ast.parse(path.read_text())
    calls = {
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    imported = {
        alias.name.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for alias in n.names
    }
    imported |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert not calls & FORBIDDEN_CALLS, f"{path.name} calls {calls & FORBIDDEN_CALLS}"
    assert not imported & FORBIDDEN_MODULES, f"{path.name} imports {imported & FORBIDDEN_MODULES}"
