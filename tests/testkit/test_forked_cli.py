"""testkit/forked_cli.py `spawn`: a long-running `tfjob` forked from one server (the
tests' operators start so) is handled as a subprocess would be: its pid, a signal, its
exit code, its output appended to its log."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil

from testkit.forked_cli import ForkedCli
from testkit.tfjob_cli import job, replica, write

SLEEPER = "import time; print('sleeping', flush=True); time.sleep(60)"


def _until_logged(log: Path, text: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not (log.is_file() and text in log.read_text()):
        assert time.monotonic() < deadline, f"no {text!r} in {log} within {limit:.0f} s"
        time.sleep(0.05)


def test_a_spawned_tfjob_is_signalled_and_ends_with_its_code(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", job("sleeper", Worker=replica(SLEEPER)))
    log = tmp_path / "tfjob.log"
    log.write_text("before\n")
    with ForkedCli("import tfjob.interfaces.run_command") as server:
        args = ("run", str(path), "--run-dir", str(tmp_path / "run"), "--grace-period", "1")
        running = server.spawn(*args, log=log, cwd=tmp_path)
        _until_logged(log, "Created pod")
        assert running.poll() is None
        assert psutil.Process(running.pid).cwd() == str(tmp_path)
        running.send_signal(signal.SIGTERM)
        assert running.wait(timeout=30) == 143  # what `tfjob run` exits with on SIGTERM
        assert running.poll() == running.returncode == 143
        running.kill()  # ended: no signal goes to the pid, which may be another's now
        text = log.read_text()
        assert text.startswith("before\n") and "Created pod: sleeper-worker-0" in text

        crashed = server.spawn(*args, log=tmp_path / "crashed.log", cwd=tmp_path)
        _until_logged(tmp_path / "crashed.log", "Created pod")
        crashed.kill()
        assert crashed.wait(timeout=30) == -signal.SIGKILL
