"""What a running job tells whoever displays it: replica output, events, pod changes.

Both sources speak this one vocabulary - the local runtime about its processes, the
Kubernetes runtime about a job followed on a cluster - so the command line has one
renderer for both (prefixed lines, colours, the live table). The runtimes only
report; they stay free of terminal concerns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tfjob.api import constants as c
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


def replica_label(
    metadata: Mapping[str, Any],
    container: str = c.DEFAULT_CONTAINER_NAME,
    training: str = c.DEFAULT_CONTAINER_NAME,
) -> str:
    """How a replica's output is prefixed: `worker-1` (type and index, else the pod's
    name), and `worker-1/sidecar` for a container other than the kind's training
    container (`training`: `tensorflow`, `pytorch`)."""
    labels = metadata.get("labels") or {}
    key, index = labels.get(c.LABEL_REPLICA_TYPE), labels.get(c.LABEL_REPLICA_INDEX)
    replica = f"{key}-{index}" if key and index is not None else str(metadata.get("name", ""))
    return replica if container == training else f"{replica}/{container}"
