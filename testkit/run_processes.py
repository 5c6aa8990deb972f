"""A `tfjob run` in the background whose replicas report their process ids."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from testkit.local_harness import gone_within
from testkit.tfjob_cli import job, replica, start_tfjob, write

START_LIMIT = 20.0  # seconds for every replica to report

# Each replica starts a grandchild (a sleeping Python) and prints both pids.
_SLEEPER = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print('pids', os.getpid(), child.pid, flush=True)\n"
    "time.sleep(120)"
)


# The same, but deaf to SIGTERM: only SIGKILL stops it.
STUBBORN = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + _SLEEPER


@contextlib.contextmanager
def started_replicas(
    tmp_path: Path, replicas: int, code: str = _SLEEPER, grace_period: str = "1"
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """tfjob running `replicas` workers; yields it and every pid of the job's processes
    (replicas, their grandchildren, and tfjob's watchdog)."""
    path = write(tmp_path / "job.yaml", job("sleepers", Worker=replica(code, replicas=replicas)))
    run_dir = str(tmp_path / "run")
    process = start_tfjob("run", str(path), "--run-dir", run_dir, "--grace-period", grace_period)
    try:
        lines = _lines(process)
        pids: list[int] = []
        deadline = time.monotonic() + START_LIMIT
        while len(pids) < 2 * replicas:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if " pids " in line:
                pids += [int(word) for word in line.split()[2:]]
        yield process, pids + _watchdogs(process.pid)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _watchdogs(tfjob_pid: int) -> list[int]:
    children = psutil.Process(tfjob_pid).children()
    return [p.pid for p in children if any("watchdog" in part for part in p.cmdline())]


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    """The process's output lines, read on a thread so waits can time out."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


__all__ = ["STUBBORN", "gone_within", "started_replicas"]
