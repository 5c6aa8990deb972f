"""The live status table `tfjob run` shows on a terminal: one row per replica.

Drawn by rich's Live, refreshed once a second (for the Elapsed column) on rich's own
thread; only ever used when stdout is a terminal, so logs piped to a file or another
program never contain it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.live import Live
from rich.table import Table

from tfjob.runtimes.local.observer import ReplicaView

_PHASE_STYLE = {
    "Pending": "yellow",
    "Running": "cyan",
    "Succeeded": "green",
    "Failed": "red",
}


class LiveView:
    """A table of the replicas at the bottom of the terminal, below their output."""

    def __init__(self, console: Console, job_name: str) -> None:
        self._job_name = job_name
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

    def _table(self) -> Table:
        title = f"TFJob {self._job_name}" + (f": {self._state}" if self._state else "")
        table = Table(title=title, title_justify="left", expand=False)
        for column in ("Replica", "Pod", "Phase", "Restarts", "Elapsed"):
            table.add_column(column)
        now = datetime.now(UTC)
        for view in sorted(self._replicas, key=lambda v: v.pod_name):
            phase = "Terminating" if view.terminating else view.phase
            table.add_row(
                view.replica,
                view.pod_name,
                f"[{_PHASE_STYLE.get(phase, 'magenta')}]{phase}[/]",
                str(view.restarts),
                _elapsed(view.started_at, now),
            )
        return table


def _elapsed(started: datetime | None, now: datetime) -> str:
    if started is None:
        return "-"
    seconds = int((now - started).total_seconds())
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
