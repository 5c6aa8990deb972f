"""Kill the replicas' process groups if tfjob dies without cleaning up (e.g. SIGKILL).

PR_SET_PDEATHSIG (see `orphans.py`) kills each replica's main process with tfjob, but
not the processes those spawn. So tfjob starts this small helper once per run, in its
own session, and tells it every process group it creates ("+PGID") and reaps ("-PGID")
over a pipe whose write end only tfjob holds. When that pipe reaches end-of-file,
tfjob is gone, however it died, and the helper SIGKILLs every group still registered.

The helper is this file run as a script with `python -S -E`: it imports nothing from
tfjob, so it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys


class Watchdog:
    """tfjob's side: start the helper and keep it informed."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-S", "-E", __file__],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C at the terminal must not kill it first
        )
        assert self._process.stdin is not None
        self._fd = self._process.stdin.fileno()

    def register(self, pgid: int) -> None:
        """Kill group `pgid` if tfjob dies before calling `unregister`."""
        self._send(f"+{pgid}\n")

    def unregister(self, pgid: int) -> None:
        """Group `pgid` is gone (reaped by tfjob): forget it, its number may be reused."""
        self._send(f"-{pgid}\n")

    def close(self) -> None:
        """Stop the helper (it kills whatever is still registered)."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        self._process.wait()

    def _send(self, line: str) -> None:
        os.write(self._fd, line.encode())


def _watch(fd: int) -> None:
    """Track registrations until end-of-file, then kill every group left."""
    groups: set[int] = set()
    pending = b""
    while chunk := os.read(fd, 4096):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch(sys.stdin.fileno())
