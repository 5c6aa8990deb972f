"""What a local run tells whoever displays it: replica output, events, pod changes.

The runtime only reports; the command line decides how to show it (prefixed lines,
colours, a live table), so the runtime stays free of terminal concerns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tfjob.core.plan import Event


@dataclass(frozen=True)
class ReplicaView:
    """One pod as a person watching the run cares about it."""

    replica: str  # e.g. "worker-1"
    pod_name: str
    phase: str
    restarts: int
    started_at: datetime | None
    terminating: bool


class RunObserver(Protocol):
    def log_line(self, replica: str, line: str) -> None:
        """A line of output from a replica (`worker-1`, or `worker-1/sidecar`)."""

    def event(self, event: Event) -> None:
        """An event the core recorded (each distinct one once)."""

    def progress(self, state: str, replicas: list[ReplicaView]) -> None:
        """After a change: the job's latest condition (e.g. "Running") and its pods."""
