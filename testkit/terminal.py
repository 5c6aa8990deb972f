"""Run a command with a pseudo-terminal as its stdout and stderr, as a user's shell
would, so it takes its terminal path (colour, the live table)."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Sequence


def run_on_terminal(args: Sequence[str], timeout: float) -> tuple[int, str]:
    """The command's exit status and everything it wrote to the terminal."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(list(args), stdout=follower, stderr=follower)
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
    return process.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")
