"""Gates for the suites that train with a real framework (tests/jax, tests/xgboost,
tests/paddle).

The replicas of the example jobs run `python3` from PATH (their YAML `command`), so
that interpreter, not necessarily the one running pytest, is the one checked, once
per session. Without the framework every test of the suite is skipped with a
one-line reason, except under CI=true, where they fail: a CI run must never pass by
skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

IMPORT_LIMIT = 120.0  # seconds; importing jax takes 1-3 on a busy machine


def unusable(probe: str, extra: str) -> str | None:
    """None if `python3` on PATH runs `probe`, else why not (naming the extra)."""
    python = shutil.which("python3")
    if python is None:
        return "no python3 on PATH to run the replicas"
    try:
        done = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=IMPORT_LIMIT
        )
    except subprocess.TimeoutExpired:
        return f"`{python} -c {probe!r}` took over {IMPORT_LIMIT:.0f}s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"{python} cannot run {probe!r} ({last}); pip install -e '.[{extra}]'"
    return None


def require(reason: str | None) -> None:
    """Skip (fail under CI=true) when `reason` says the framework is unusable."""
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)
