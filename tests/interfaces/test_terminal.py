"""What `tfjob run` shows depends on where its output goes: a terminal gets colour and
the live status table, anything else plain prefixed lines."""

from __future__ import annotations

from pathlib import Path

from testkit.terminal import run_on_terminal
from testkit.tfjob_cli import RUN_LIMIT, TFJOB, job, replica, tfjob, write

_JOB = job("shown", Worker=replica("print('hello')", replicas=2))
_JOB["spec"]["successPolicy"] = "AllWorkers"  # wait for both, not just worker-0


def test_a_terminal_gets_colour_and_the_live_table(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _JOB)
    status, output = run_on_terminal(
        [*TFJOB, "run", str(path), "--run-dir", str(tmp_path / "run")], RUN_LIMIT
    )
    assert status == 0, output
    assert "\x1b[" in output  # colour
    assert "REPLICA" in output and "RESTARTS" in output and "ELAPSED" in output
    assert "shown-worker-1" in output
    assert "hello" in output


def test_no_view_keeps_colour_but_drops_the_table(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _JOB)
    status, output = run_on_terminal(
        [*TFJOB, "run", str(path), "--run-dir", str(tmp_path / "run"), "--no-view"], RUN_LIMIT
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
