"""What `tfjob run` shows depends on where its output goes: a terminal gets colour and
the live status table, anything else plain prefixed lines."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from tests.support.tfjob_cli import RUN_LIMIT, TFJOB, job, replica, tfjob, write

_JOB = job("shown", Worker=replica("print('hello')", replicas=2))
_JOB["spec"]["successPolicy"] = "AllWorkers"  # wait for both, not just worker-0


def _run_on_terminal(*args: str) -> tuple[int, str]:
    """Run tfjob with a pseudo-terminal as stdout and stderr; its exit status and output."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([*TFJOB, *args], stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=RUN_LIMIT), b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_colour_and_the_live_table(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _JOB)
    status, output = _run_on_terminal("run", str(path), "--run-dir", str(tmp_path / "run"))
    assert status == 0, output
    assert "\x1b[" in output  # colour
    assert "REPLICA" in output and "RESTARTS" in output and "ELAPSED" in output
    assert "shown-worker-1" in output
    assert "hello" in output


def test_no_view_keeps_colour_but_drops_the_table(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _JOB)
    status, output = _run_on_terminal(
        "run", str(path), "--run-dir", str(tmp_path / "run"), "--no-view"
    )
    assert status == 0, output
    assert "\x1b[" in output
    assert "RESTARTS" not in output


def test_a_pipe_gets_plain_lines_only(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _JOB)
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    assert "RESTARTS" not in result.stdout
    assert {"[worker-0] hello", "[worker-1] hello"} <= set(result.stdout.splitlines())
