"""`tfjob run` of a 16-replica job: how fast the replicas start, what tfjob costs idle.

Two figures, each next to a baseline measured in the same run on the same machine:
- start: from launching `tfjob run` until all 16 replica processes have started
  (each prints a line). Baseline: launching the same 16 commands with plain
  subprocess.Popen from an already running Python. The difference is what tfjob adds:
  its own start-up (imports), the reconcile and the spawning. Target: <= 1 s.
  A third figure splits tfjob's time: how much of it is Python starting and importing
  the `tfjob` command (a fixed cost of any CLI), measured alone.
- idle CPU: tfjob's own CPU (all its threads, not its children) while the 16 replicas
  sleep, measured with psutil over a few seconds. Baseline: the Popen parent, which
  only waits. Target: <= 2% of one core.
It also shows how long Ctrl-C takes to stop all 16 (they exit on SIGTERM at once).

Run: python bench/local_run_bench.py  [rounds, default 3]
"""

from __future__ import annotations

import contextlib
import os
import pty
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit import helpers

REPLICAS = 16
IDLE_SECONDS = 5.0
# The replicas announce themselves, then sleep; sh is the user's choice here, not tfjob's.
COMMAND = ["/bin/sh", "-c", "echo up; exec sleep 120"]
TFJOB = [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()"]


def job_file(folder: Path) -> Path:
    worker = helpers.replica(REPLICAS, containers=[helpers.container("none", COMMAND)])
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(helpers.tfjob("bench", None, {"Worker": worker})))
    return path


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def wait_for_ups(lines: queue.Queue[str], count: int) -> None:
    seen = 0
    while seen < count:
        if lines.get(timeout=30).rstrip().endswith("up"):
            seen += 1


def cpu_percent(process: psutil.Process, seconds: float) -> float:
    """CPU used by `process` itself (user + system, all threads) as % of one core."""
    before = process.cpu_times()
    time.sleep(seconds)
    after = process.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return 100.0 * used / seconds


def tfjob_on_terminal_idle(folder: Path) -> float:
    """tfjob's idle CPU with its stdout on a (pseudo-)terminal: the live table redraws."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [
            *TFJOB,
            "run",
            str(job_file(folder)),
            "--run-dir",
            str(folder / "tty"),
            "--grace-period",
            "2",
        ],
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    threading.Thread(target=_drain, args=(leader,), daemon=True).start()
    tfjob = psutil.Process(process.pid)
    deadline = time.monotonic() + 30
    while sum(p.name() == "sleep" for p in tfjob.children()) < REPLICAS:  # all exec'd
        if time.monotonic() > deadline:
            raise TimeoutError("the replicas did not start")
        time.sleep(0.1)
    time.sleep(1.0)  # let start-up settle before measuring idle
    idle = cpu_percent(tfjob, IDLE_SECONDS)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    return idle


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


def tfjob_round(folder: Path) -> tuple[float, float, float]:
    began = time.perf_counter()
    process = subprocess.Popen(
        [
            *TFJOB,
            "run",
            str(job_file(folder)),
            "--run-dir",
            str(folder / "run"),
            "--grace-period",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = lines_of(process)
    wait_for_ups(lines, REPLICAS)
    started = time.perf_counter() - began
    time.sleep(1.0)  # let start-up settle before measuring idle
    idle = cpu_percent(psutil.Process(process.pid), IDLE_SECONDS)
    stop_began = time.perf_counter()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    return started, idle, time.perf_counter() - stop_began


def baseline_round() -> tuple[float, float]:
    """The same 16 commands under plain Popen, from this (already running) Python."""
    began = time.perf_counter()
    children = [
        subprocess.Popen(COMMAND, stdout=subprocess.PIPE, text=True, start_new_session=True)
        for _ in range(REPLICAS)
    ]
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
    started = time.perf_counter() - began
    waiter = threading.Thread(target=lambda: [c.wait() for c in children], daemon=True)
    waiter.start()
    idle = cpu_percent(psutil.Process(), IDLE_SECONDS)
    for child in children:
        child.terminate()
    waiter.join()
    return started, idle


def import_round() -> float:
    """Starting Python and importing the tfjob command, doing nothing else."""
    began = time.perf_counter()
    subprocess.run([*TFJOB[:2], "import tfjob.interfaces.cli"], check=True)
    return time.perf_counter() - began


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            results.append(
                (
                    *tfjob_round(Path(folder)),
                    *baseline_round(),
                    import_round(),
                    tfjob_on_terminal_idle(Path(folder)),
                )
            )
    start, idle, stop, base_start, base_idle, imports, tty_idle = (
        statistics.median(column) for column in zip(*results, strict=True)
    )
    print(f"{REPLICAS} replicas, median of {rounds} rounds on {psutil.cpu_count()} cores")
    print(f"all started   tfjob run {ms(start)}  (Popen baseline {ms(base_start)}; of tfjob's")
    print(f"              time, Python start + imports take {ms(imports)})   target <= 1000 ms")
    print(
        f"idle CPU      tfjob run {idle:7.2f} %  (Popen baseline {base_idle:.2f} %)  target <= 2 %"
    )
    print(f"  on a tty    tfjob run {tty_idle:7.2f} %  (with the live table, redrawn every second)")
    print(f"Ctrl-C stop   tfjob run {ms(stop)}")

    from results import record  # bench/ is the script's folder, first on sys.path

    record(
        "local_run_bench",
        {
            "rounds": rounds,
            "all started, ms": start * 1000,
            "all started, Popen baseline, ms": base_start * 1000,
            "Python start + imports, ms": imports * 1000,
            "idle CPU, %": idle,
            "idle CPU, Popen baseline, %": base_idle,
            "idle CPU on a tty, %": tty_idle,
            "Ctrl-C stop, ms": stop * 1000,
        },
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:5.0f} ms"


if __name__ == "__main__":
    main()
