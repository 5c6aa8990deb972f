"""An operator's parts built in-process on the real API server, for the tests of the
status writer and the reconciler that need no operator subprocess.

``Lane`` holds the operator's caches, queue and write-behind status writer; only what
a test starts (the informers, ``start(...)``) runs. ``until`` polls a condition on the
event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from testkit.helpers import tfjob, until
from testkit.operators import replica
from tfjob.api.types import JobStatus, TFJob
from tfjob.runtimes.kubernetes.client import KubeClient
from tfjob.runtimes.kubernetes.decode import decode_tfjob
from tfjob.runtimes.kubernetes.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.resources import TFJOBS
from tfjob.runtimes.kubernetes.status_writer import StatusWriter


class Lane:
    """An operator's parts, built in-process; only what a test starts runs."""

    def __init__(self, client: KubeClient, namespace: str, bound: float) -> None:
        self.client = client
        self.namespace = namespace
        options = OperatorOptions(namespace=namespace, metrics_port=-1, health_port=-1)
        self.parts = Operator(options, client)
        self.jobs = self.parts.caches.jobs
        self.queue = self.parts.queue
        self.writes = self.parts.writes  # the creates and deletes statuses yield to
        self.writer = StatusWriter(
            client,
            self.jobs,
            self.parts.retry,
            max_delay=bound,
            start_delay=bound,
            writes=self.writes,
        )
        self.puts: list[int] = []  # the codes of our status PUTs
        client.on_response = self._answered
        self.tasks: list[asyncio.Task[None]] = []
        self.stored: list[str] = []

    def _answered(self, method: str, code: int) -> None:
        if method == "PUT":
            self.puts.append(code)

    def start(self, *work: Any) -> None:
        self.tasks += [asyncio.create_task(w) for w in work]

    async def informers(self) -> None:
        caches = self.parts.caches
        self.start(caches.jobs.run(), caches.pods.run(), caches.services.run())
        for informer in (caches.jobs, caches.pods, caches.services):
            await asyncio.wait_for(informer.synced.wait(), 10)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def job(self, name: str) -> TFJob:
        manifest = tfjob(name, self.namespace, {"Worker": replica(1)})
        await self.client.create(TFJOBS, self.namespace, manifest)
        key = f"{self.namespace}/{name}"
        await until(lambda: self.jobs.get(key) is not None)
        cached = self.jobs.get(key)
        assert isinstance(cached, TFJob)
        return cached

    async def server_status(self, name: str) -> JobStatus:
        return decode_tfjob(await self.client.get(TFJOBS, self.namespace, name)).status

    def note(self, what: str) -> Any:
        return lambda: self.stored.append(what)
