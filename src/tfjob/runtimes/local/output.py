"""A container's output: kept in a log file and handed on line by line for display.

Output arrives in chunks as the process writes it (the event loop wakes only when there
is data) and is split into whole lines, so the stdout and stderr of one replica interleave by line
in its file, never mid-line. The file is opened in append mode: a replica restarted in
place or recreated by the core continues the same file after a marker line.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tfjob.api.timestamps import rfc3339

# Called with each whole line of one container's output.
OnContainerLine = Callable[[str], None]

_LONGEST_LINE = 1 << 20  # a "line" this long without a newline is passed on as is


class ContainerLog:
    """The log file of one container of one pod."""

    def __init__(self, path: Path, on_line: OnContainerLine) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("ab")
        self._on_line = on_line
        self._pending: dict[int, bytes] = {}

    def marker(self, text: str) -> None:
        """A line of tfjob's own in the file (not displayed), with the time."""
        stamp = rfc3339(datetime.now(UTC))
        self._file.write(f"----- tfjob {stamp}: {text} -----\n".encode())
        self._file.flush()

    def feed(self, stream: int, data: bytes) -> None:
        """Output that arrived on `stream` (1 or 2): pass on its whole lines."""
        *lines, pending = (self._pending.pop(stream, b"") + data).split(b"\n")
        if len(pending) > _LONGEST_LINE:
            lines.append(pending)
            pending = b""
        if pending:
            self._pending[stream] = pending
        self._emit(lines)

    def end(self, stream: int) -> None:
        """`stream` closed: pass on its last, unterminated line."""
        pending = self._pending.pop(stream, b"")
        if pending:
            self._emit([pending])

    def close(self) -> None:
        self._file.close()

    def _emit(self, lines: list[bytes]) -> None:
        if not lines:
            return
        self._file.write(b"".join(line + b"\n" for line in lines))
        self._file.flush()
        for line in lines:
            self._on_line(line.decode(errors="replace").rstrip("\r"))
