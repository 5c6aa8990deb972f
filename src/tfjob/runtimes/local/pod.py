"""A local pod: the containers of one pod manifest, reported as a Kubernetes Pod.

The phase follows the kubelet's rules: Pending until every container has started,
Running while any container runs or will be restarted in place, then Succeeded if all
exited 0, otherwise Failed. Deleting a pod is graceful: SIGTERM to every container's
process group, then SIGKILL after the grace period; meanwhile the pod carries a
deletionTimestamp, so the core sees it terminating.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from tfjob.api.observed import Meta, OwnerReference, Pod, PodStatus
from tfjob.api.timestamps import rfc3339
from tfjob.runtimes.local.container import LocalContainer


class LocalPod:
    """One pod: its identity (from the manifest) and its containers."""

    def __init__(
        self, manifest: Mapping[str, Any], replica: str, containers: list[LocalContainer]
    ) -> None:
        metadata = manifest.get("metadata", {})
        self.manifest = manifest
        self.replica = replica  # how it is shown, e.g. "worker-1"
        self.name = str(metadata.get("name", ""))
        self.containers = containers
        self.deleted_at: datetime | None = None
        self._meta = Meta(
            name=self.name,
            namespace=str(metadata.get("namespace", "")),
            uid=str(uuid.uuid4()),
            labels=dict(metadata.get("labels") or {}),
            owner_references=msgspec.convert(
                metadata.get("ownerReferences") or [], tuple[OwnerReference, ...]
            ),
        )

    def start(self) -> None:
        for container in self.containers:
            container.start()

    @property
    def phase(self) -> str:
        containers = self.containers
        if any(c.active and not c.started for c in containers):
            return "Pending"
        if any(c.active for c in containers):
            return "Running"
        return "Succeeded" if all(c.exit_code == 0 for c in containers) else "Failed"

    @property
    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers)

    @property
    def started_at(self) -> datetime | None:
        starts = [c.started_at for c in self.containers if c.started_at is not None]
        return min(starts) if starts else None

    def observed(self) -> Pod:
        """The pod as a kubelet would report it to the API server."""
        meta = self._meta
        if self.deleted_at is not None:
            meta = msgspec.structs.replace(meta, deletion_timestamp=rfc3339(self.deleted_at))
        status = PodStatus(
            phase=self.phase, container_statuses=tuple(c.status() for c in self.containers)
        )
        return Pod(metadata=meta, status=status)

    def terminate(self) -> None:
        """Begin a graceful deletion: mark the pod terminating, SIGTERM its containers."""
        if self.deleted_at is None:
            self.deleted_at = datetime.now(UTC)
        self._signal(signal.SIGTERM)

    async def stopped(self, grace_period: float) -> None:
        """Wait for the containers to exit; SIGKILL them after `grace_period` seconds."""
        waiting = asyncio.gather(*(c.wait() for c in self.containers))
        try:
            async with asyncio.timeout(grace_period):
                await asyncio.shield(waiting)
        except TimeoutError:
            self.kill()
            await waiting

    def kill(self) -> None:
        """SIGKILL every container's process group now."""
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        for container in self.containers:
            container.send(signum)
