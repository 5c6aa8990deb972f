"""The status table of a job's replicas, one row per pod: live at the bottom of the
terminal while `tfjob run` or `tfjob submit --follow` runs, once in `tfjob get NAME`.

The live view is drawn by rich's Live, refreshed once a second (for the Elapsed
column) on rich's own thread; only ever used when stdout is a terminal, so logs piped
to a file or another program never contain it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.live import Live
from rich.text import Text

from tfjob.core.progress import ReplicaView

_HEADER = ("REPLICA", "POD", "PHASE", "RESTARTS", "ELAPSED")
_PHASE_STYLE = {
    "Pending": "yellow",
    "Running": "cyan",
    "Succeeded": "green",
    "Failed": "red",
    "Terminating": "magenta",
}


class LiveView:
    """A table of the replicas at the bottom of the terminal, below their output."""

    def __init__(self, console: Console, title: str) -> None:
        self._title = title
        self._state = ""
        self._replicas: list[ReplicaView] = []
        self._live = Live(
            console=console,
            get_renderable=self._table,
            refresh_per_second=1,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()

    def update(self, state: str, replicas: list[ReplicaView]) -> None:
        self._state = state
        self._replicas = replicas
        self._live.refresh()

    def _table(self) -> Text:
        return replica_table(self._title, self._state, self._replicas, datetime.now(UTC))


def replica_table(title: str, state: str, replicas: list[ReplicaView], now: datetime) -> Text:
    """The table as styled text laid out by hand, like `kubectl get pods`: a rich
    Table costs about ten times as much to draw, every second."""
    rows = [
        (
            view.replica,
            view.pod_name,
            "Terminating" if view.terminating else view.phase,
            str(view.restarts),
            _elapsed(view.started_at, now),
        )
        for view in sorted(replicas, key=lambda v: v.pod_name)
    ]
    widths = [max(len(row[i]) for row in [_HEADER, *rows]) for i in range(len(_HEADER))]
    title += f": {state}" if state else ""
    text = Text()
    text.append(title + "\n", style="bold")
    for number, row in enumerate([_HEADER, *rows]):
        for column, cell in enumerate(row):
            style = "dim" if number == 0 else _PHASE_STYLE.get(cell, "") if column == 2 else ""
            text.append(cell.ljust(widths[column] + 2), style=style)
        text.append("\n")
    text.rstrip()
    return text


def _elapsed(started: datetime | None, now: datetime) -> str:
    if started is None:
        return "-"
    seconds = int((now - started).total_seconds())
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
