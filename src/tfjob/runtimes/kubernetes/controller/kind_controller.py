"""One kind's controller: its view of the shared caches, its work queue, its
reconciler and its workers.

The operator runs one per kind it serves (operator.py), as Kubeflow's manager runs one
controller per enabled scheme. They share the API client, the caches (one informer
per resource: cache/shared.py), the event recorder, the metrics and the Lease. A
kind's view (`JobCaches`) holds its own jobs and, of the shared caches, the objects
its jobs own (by the owner index); its queue holds only its jobs' `namespace/name`
keys, so a key never needs to carry the kind and two kinds' jobs of one name never
meet. The worker loop (`Controller`) is every controller's: TrainJob's too
(trainjob_controller.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

import structlog

from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.consistency import JobCaches
from tfjob.runtimes.kubernetes.cache.shared import SharedInformers
from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.controller.lifecycle import JobLifecycle
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.reconciler import Reconciler, Result
from tfjob.runtimes.kubernetes.transport.client import KubeClient

log = structlog.get_logger("tfjob.operator")


class Reconciles(Protocol):
    async def reconcile(self, key: str) -> Result: ...


class Controller:
    """A queue, the reconciler its keys go to and the worker loop between them: what
    every controller has (a v1 kind's below, TrainJob's in trainjob_controller.py)."""

    reconciler: Reconciles

    def __init__(self, name: str, kind_name: str, plural: str, metrics: Metrics) -> None:
        """`name`: the `controller` label of its metrics; `kind_name`: its logs'."""
        self._name = name
        self._kind_name = kind_name
        self.plural = plural  # its tasks' names
        self._metrics = metrics
        self.queue = WorkQueue(hooks=metrics.queue_hooks(name))

    async def work(self) -> None:
        """The worker loop: the one place that hands keys back to the queue, from the
        reconciler's Result or the kind of error it raised."""
        reconcile_time = self._metrics.reconcile_time.labels(controller=self._name)
        while True:
            # A reconcile with nothing to write, and get() with keys waiting, never
            # suspend: without this a worker would run a whole backlog (10,000 jobs
            # after a restart) in one go, and /readyz, /healthz and the watches with it.
            await asyncio.sleep(0)
            if (key := await self.queue.get()) is None:
                break
            structlog.contextvars.bind_contextvars(job=key, kind=self._kind_name)
            started = time.perf_counter()
            result = "success"
            try:
                outcome = await self.reconciler.reconcile(key)
            except Exception as error:  # a bad job must never stop a worker
                result = "error"
                self._metrics.reconcile_errors.labels(controller=self._name).inc()
                self.retry(key, error)
            else:
                self.queue.forget(key)
                if outcome.requeue_after is not None:
                    self.queue.add_after(key, outcome.requeue_after)
            finally:
                self.queue.done(key)
                reconcile_time.observe(time.perf_counter() - started)
                self._metrics.reconcile_total.labels(controller=self._name, result=result).inc()
                structlog.contextvars.clear_contextvars()

    def retry(self, key: str, error: Exception) -> None:
        """Hand `key` back to the queue after `error` from a reconcile, by its kind:
        a PermanentError is given up (the job's next watch event brings it back), a
        TemporaryError with a `delay` comes back after it, anything else (a bug
        included) with per-key exponential backoff."""
        text = str(error) or repr(error)
        if isinstance(error, PermanentError):
            log.error("reconcile failed, not retrying", error=text)
            self.queue.forget(key)
        elif isinstance(error, TemporaryError) and error.delay is not None:
            log.info("reconciling again", after=error.delay, error=text)
            self.queue.add_after(key, error.delay)
        else:
            log.warning("reconcile failed, will retry", error=text)
            self.queue.add_rate_limited(key)


class KindController(Controller):
    """Everything that serves one kind of job."""

    def __init__(
        self,
        kind: Framework[Any],
        client: KubeClient,
        *,
        shared: SharedInformers,
        recorder: EventRecorder,
        metrics: Metrics,
        writes: ReconcileWrites,
        settings: Settings,
        parallelism: int,
        namespace: str | None = None,
    ) -> None:
        """`namespace`: the one the operator is limited to (`--namespace`), if any:
        its job series exist from start-up (lifecycle.py)."""
        super().__init__(kind.controller_name, kind.kind, kind.plural, metrics)
        self.kind = kind
        self.caches = JobCaches(kind, shared)
        JobLifecycle(kind, metrics, namespace).watch(self.caches)
        self.reconciler = Reconciler(
            kind=kind,
            client=client,
            caches=self.caches,
            recorder=recorder,
            metrics=metrics,
            settings=settings,
            writes=writes,
            parallelism=parallelism,
        )
