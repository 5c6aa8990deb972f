"""How a local run looks in the terminal: replica output prefixed `[worker-1]`, events
prefixed `[tfjob]`, and (on a terminal) the live status table.

On a terminal each replica's prefix has its own colour; anywhere else the output is
plain text, one line per line, ready for grep or a log file.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from tfjob.core.plan import Event
from tfjob.core.progress import ReplicaView

if TYPE_CHECKING:
    from rich.console import Console

    from tfjob.interfaces.live_view import LiveView

_COLOURS = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "bright_red",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "red",
)


class RunConsole:
    """A RunObserver that writes to a stream (stdout, or stderr with --output); the live
    view, if asked for, is shown only when that stream is a terminal."""

    def __init__(self, stream: IO[str], title: str, *, live_view: bool) -> None:
        """`title`: the live view's, the job's kind and name (`PyTorchJob train`)."""
        self._stream = stream
        self._colours: dict[str, str] = {}
        self._rich: Console | None = None
        self._view: LiveView | None = None
        if stream.isatty():  # rich costs a tenth of a second to import: only when shown
            from rich.console import Console

            from tfjob.interfaces.live_view import LiveView

            self._rich = Console(file=stream, soft_wrap=True, highlight=False)
            self._view = LiveView(self._rich, title) if live_view else None

    def __enter__(self) -> RunConsole:
        if self._view is not None:
            self._view.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._view is not None:
            self._view.stop()

    def log_line(self, replica: str, line: str) -> None:
        if self._rich is None:
            self._stream.write(f"[{replica}] {line}\n")
            self._stream.flush()
            return
        from rich.text import Text

        prefix = Text(f"[{replica}] ", style=self._colour(replica.split("/")[0]))
        self._rich.print(Text.assemble(prefix, Text.from_ansi(line)))

    def event(self, event: Event) -> None:
        self.note(
            event.message if event.type == "Normal" else f"{event.reason}: {event.message}",
            warning=event.type != "Normal",
        )

    def note(self, text: str, *, warning: bool = False) -> None:
        """A line of tfjob's own, e.g. where the logs go."""
        if self._rich is None:
            self._stream.write(f"[tfjob] {text}\n")
            self._stream.flush()
            return
        from rich.text import Text

        style = "yellow" if warning else "dim"
        self._rich.print(Text.assemble(("[tfjob] ", "bold"), (text, style)))

    def progress(self, state: str, replicas: list[ReplicaView]) -> None:
        if self._view is not None:
            self._view.update(state, replicas)

    def _colour(self, replica: str) -> str:
        if replica not in self._colours:
            self._colours[replica] = _COLOURS[len(self._colours) % len(_COLOURS)]
        return self._colours[replica]
