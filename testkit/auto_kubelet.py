"""A kubelet stand-in for whole namespaces: every pod runs, then succeeds (tests, bench).

``AutoKubelet.loop`` polls the namespace's pods (admin client) and moves each one on
as a kubelet would through ``FakeKubelet``: a new pod goes Running, a Running pod
Succeeds after ``hold`` seconds (or fails with 137 on its first run, for names in
``fail_first``). It remembers every UID each pod name had, so a test can tell a pod
created twice. ``playing_kubelet`` runs one in a thread for the length of a block.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod

from testkit.kubelet import FakeKubelet


@dataclass
class AutoKubelet:
    """Runs every new pod and completes every Running one after `hold` seconds."""

    kube: Client
    namespace: str
    hold: float = 0.5
    fail_first: set[str] = field(default_factory=set)  # these pods' first run exits 137
    uids: dict[str, set[str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _running_since: dict[str, float] = field(default_factory=dict)

    def loop(self) -> None:
        kubelet = FakeKubelet(self.kube)
        while not self._stop.wait(0.2):
            with contextlib.suppress(Exception):  # an API server restart, a racing delete
                for pod in self.kube.list(Pod, namespace=self.namespace):
                    self._step(kubelet, pod)

    def _step(self, kubelet: FakeKubelet, pod: Pod) -> None:
        meta = pod.metadata
        if meta is None or meta.name is None or meta.deletionTimestamp is not None:
            return
        self.uids.setdefault(meta.name, set()).add(str(meta.uid))
        phase = pod.status.phase if pod.status is not None else None
        key = f"{meta.name}/{meta.uid}"
        try:
            if phase in (None, "Pending"):
                kubelet.run(self.namespace, meta.name)
                self._running_since[key] = time.monotonic()
            elif phase == "Running":
                since = self._running_since.setdefault(key, time.monotonic())
                if time.monotonic() - since < self.hold:
                    return
                if meta.name in self.fail_first and len(self.uids[meta.name]) == 1:
                    kubelet.fail(self.namespace, meta.name, 137, "OOMKilled")
                else:
                    kubelet.succeed(self.namespace, meta.name)
        except ApiError:
            pass

    def stop(self) -> None:
        self._stop.set()


@contextlib.contextmanager
def playing_kubelet(kube: Client, namespace: str, **options: Any) -> Iterator[AutoKubelet]:
    """An AutoKubelet running in a thread for the duration of the block."""
    player = AutoKubelet(kube, namespace, **options)
    thread = threading.Thread(target=player.loop, daemon=True)
    thread.start()
    try:
        yield player
    finally:
        player.stop()
        thread.join(10)
