"""A LocalKubelet on real processes, and the pod manifests a core would hand it."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tfjob.api.observed import Pod
from tfjob.runtimes.local.kubelet import LocalKubelet

PY = sys.executable
WAIT_LIMIT = 10.0  # seconds; every wait in these tests is far shorter


def pod_manifest(
    name: str,
    *containers: dict[str, Any],
    restart_policy: str = "Never",
    replica: tuple[str, int] = ("worker", 0),
    grace: int | None = None,
) -> dict[str, Any]:
    """A pod as the core would ask for it (only the fields the kubelet reads)."""
    spec: dict[str, Any] = {"containers": list(containers), "restartPolicy": restart_policy}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "training.kubeflow.org/replica-type": replica[0],
                "training.kubeflow.org/replica-index": str(replica[1]),
                "team": "ml",
            },
            "annotations": {"note": "hello"},
        },
        "spec": spec,
    }


def python(code: str, name: str = "tensorflow", **extra: Any) -> dict[str, Any]:
    """A container running `code` with the test's Python."""
    return {"name": name, "image": "ignored", "command": [PY, "-c", code], **extra}


class Harness:
    """A kubelet plus what it reported: lines by replica, and a way to wait for state."""

    def __init__(self, tmp_path: Path, addresses: dict[str, list[str]] | None = None) -> None:
        self.lines: list[tuple[str, str]] = []
        self.log_dir = tmp_path / "logs"
        self._changed = asyncio.Event()
        self.kubelet = LocalKubelet(
            base_dir=tmp_path,
            log_dir=self.log_dir,
            addresses=addresses,
            grace_period=None,
            on_line=self._line,
            on_change=self._changed.set,
        )

    def _line(self, replica: str, line: str) -> None:
        self.lines.append((replica, line))
        self._changed.set()

    def pod(self, name: str) -> Pod | None:
        return next((p for p in self.kubelet.pods() if p.metadata.name == name), None)

    async def until(self, check: Callable[[], bool]) -> None:
        """Wait, woken by the kubelet's notifications (and output), until `check()` holds."""
        async with asyncio.timeout(WAIT_LIMIT):
            while not check():
                self._changed.clear()
                await self._changed.wait()

    async def phase(self, name: str, phase: str) -> Pod:
        await self.until(lambda: (p := self.pod(name)) is not None and p.status.phase == phase)
        pod = self.pod(name)
        assert pod is not None
        return pod


def gone_within(pids: list[int], seconds: float = 2.0) -> bool:
    """Whether every process in `pids` is dead (or a zombie) within `seconds`: a SIGKILL
    takes effect a moment after it is sent."""
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
