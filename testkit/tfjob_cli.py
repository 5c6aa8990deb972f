"""Driving the real `tfjob` command in a child process, and writing jobs for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from testkit import helpers

REPO = Path(__file__).resolve().parents[1]
TFJOB = [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()"]
RUN_LIMIT = 60.0  # seconds; every run in these tests takes a few


def tfjob_command() -> list[str]:
    """The `tfjob` console script of this Python, as a user would start it (the
    module's `main` where the script is not installed)."""
    beside = Path(sys.executable).with_name("tfjob")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return list(TFJOB)


def tfjob(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `tfjob ARGS` to the end; output captured as text."""
    return subprocess.run(
        [*TFJOB, *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_LIMIT, env=_env()
    )


def start_tfjob(*args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    """Start `tfjob ARGS` in the background, stdout piped, stderr merged into it."""
    return subprocess.Popen(
        [*TFJOB, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def replica(code: str, *, replicas: int = 1, restart_policy: str = "Never") -> dict[str, Any]:
    """A replica spec whose tensorflow container runs `code` with this Python."""
    command = [sys.executable, "-c", code]
    return helpers.replica(replicas, restart_policy, [helpers.container("python", command)])


def job(
    name: str, run_policy: dict[str, Any] | None = None, **specs: dict[str, Any]
) -> dict[str, Any]:
    """A TFJob for `tfjob run` (no namespace): `job("x", Worker=replica(code))`."""
    return helpers.tfjob(name, None, specs, **({"runPolicy": run_policy} if run_policy else {}))


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path
