"""An operator's parts built in-process, on the real API server or the in-memory one,
for the tests of the reconciler and its consistency rule that need no operator
subprocess.

``OperatorParts`` holds the operator and its TFJob controller (caches, queue and
reconciler); only what a test starts (the informers, ``start(...)``) runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from testkit.helpers import tfjob, until
from testkit.operators import replica
from tfjob.api.types import JobStatus
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.controller.dry_run import DryRun
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.controller.reconciler import Reconciler
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import JobDecoder
from tfjob.runtimes.kubernetes.transport.resources import jobs_of

TFJOBS = jobs_of(TENSORFLOW)
TFJOB_DECODER = JobDecoder(TFJob)


class OperatorParts:
    """An operator's parts, built in-process; only what a test starts runs."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        options = OperatorOptions(namespace=namespace, metrics_port=-1, health_port=-1)
        self.operator = Operator(options, client)
        self.controller = self.operator.controllers[TENSORFLOW.kind]
        self.caches = self.controller.caches
        self._informers: list[asyncio.Task[None]] = []
        self.jobs = self.caches.jobs
        self.queue = self.controller.queue
        self.requests: list[tuple[str, int]] = []  # (method, code) of every request
        client.on_response = self._answered
        self.tasks: list[asyncio.Task[None]] = []

    def _answered(self, method: str, code: int) -> None:
        self.requests.append((method, code))

    def sent(self, method: str) -> list[int]:
        """The codes of the requests sent with `method`."""
        return [code for m, code in self.requests if m == method]

    def reconciler(
        self,
        *,
        client: Any = None,
        clock: Callable[[], datetime] | None = None,
        dry_run: DryRun | None = None,
    ) -> Reconciler:
        """A reconciler on these parts; `client` (e.g. one that injects faults), `clock`
        and `dry_run` replace the operator's."""
        operator = self.operator
        return Reconciler(
            kind=TENSORFLOW,
            client=client or self.client,
            caches=self.caches,
            recorder=operator.recorder,
            metrics=operator.metrics,
            settings=Settings(),
            writes=operator.writes,
            clock=clock or (lambda: datetime.now(UTC)),
            dry_run=dry_run,
        )

    def start(self, *work: Any) -> None:
        self.tasks += [asyncio.create_task(w) for w in work]

    async def informers(self) -> None:
        """Start (or resume: each watches on from where it stopped) the three caches."""
        caches = self.caches
        work = (caches.jobs.run(), caches.pods.run(), caches.services.run())
        self._informers = [asyncio.create_task(w) for w in work]
        for informer in (caches.jobs, caches.pods, caches.services):
            await asyncio.wait_for(informer.synced.wait(), 10)

    async def pause(self) -> None:
        """Stop the caches' watches: what happens now is not seen until `informers()`."""
        for task in self._informers:
            task.cancel()
        await asyncio.gather(*self._informers, return_exceptions=True)

    async def stop(self) -> None:
        await self.pause()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def job(self, name: str, workers: int = 1) -> TFJob:
        manifest = tfjob(name, self.namespace, {"Worker": replica(workers)})
        await self.client.create(TFJOBS, self.namespace, manifest)
        key = f"{self.namespace}/{name}"
        await until(lambda: self.jobs.get(key) is not None)
        cached = self.jobs.get(key)
        assert isinstance(cached, TFJob)
        return cached

    async def server_status(self, name: str) -> JobStatus:
        return TFJOB_DECODER.one(await self.client.get(TFJOBS, self.namespace, name)).status
