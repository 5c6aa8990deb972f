"""One kind's controller: its caches, its work queue, its reconciler and its workers.

The operator runs one per kind it serves (operator.py), as Kubeflow's manager runs one
controller per enabled scheme. They share the API client, the event recorder, the
metrics, the gang groups and the Lease; nothing else. A kind's caches hold only its
jobs and the pods and services labelled with its operator name
(`training.kubeflow.org/operator-name=pytorchjob-controller`), and, for a kind that
owns other objects (`owned_kinds`: MPIJob's ConfigMaps..., PyTorchJob's HPAs), those
labelled so too, one cache per kind of object; its queue holds only its
jobs' `namespace/name` keys, so a key never needs to carry the kind and two kinds'
jobs of one name never meet.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.consistency import JobCaches
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.controller.gang_groups import GangGroups
from tfjob.runtimes.kubernetes.controller.handlers import Wiring
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.reconciler import Reconciler
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import (
    POD_PROTO_CODEC,
    SERVICE_CODEC,
    JobDecoder,
    owned_codec,
)
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    jobs_of,
    owned_by,
    resource_of,
)

log = structlog.get_logger("tfjob.operator")


class KindController:
    """Everything that serves one kind of job."""

    def __init__(
        self,
        kind: Framework[Any],
        client: KubeClient,
        *,
        namespace: str | None,
        recorder: EventRecorder,
        metrics: Metrics,
        writes: ReconcileWrites,
        settings: Settings,
        parallelism: int,
        gang: GangGroups | None,
    ) -> None:
        self.kind = kind
        self._metrics = metrics
        self._name = kind.controller_name  # the `controller` label of upstream's metrics
        self.queue = WorkQueue(hooks=metrics.queue_hooks(self._name))
        owned = owned_by(kind)
        self.caches = JobCaches(
            kind,
            jobs=Informer(
                client, jobs_of(kind), JobDecoder(kind.job_type).codec, namespace=namespace
            ),
            pods=Informer(client, PODS, POD_PROTO_CODEC, namespace=namespace, label_selector=owned),
            services=Informer(
                client,
                SERVICES,
                SERVICE_CODEC,
                namespace=namespace,
                label_selector=owned,
                metadata_only=True,  # the core reads only a service's metadata
            ),
            # Only for the kinds that own other objects (MPIJob, PyTorchJob's HPA).
            owned={
                owned_kind: Informer(
                    client,
                    resource_of(owned_kind),
                    owned_codec(owned_kind.api_version, owned_kind.kind),
                    namespace=namespace,
                    label_selector=owned,
                )
                for owned_kind in kind.owned_kinds
            },
        )
        Wiring(self.caches, self.queue, recorder, metrics).wire()
        self.reconciler = Reconciler(
            kind=kind,
            client=client,
            caches=self.caches,
            recorder=recorder,
            metrics=metrics,
            settings=settings,
            writes=writes,
            parallelism=parallelism,
            gang=gang,
        )

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (
            self.caches.jobs,
            self.caches.pods,
            self.caches.services,
            *self.caches.owned.values(),
        )

    def watch(self) -> list[asyncio.Task[None]]:
        """Start the caches (pods first: a job's first reconcile wants them)."""
        plural = self.kind.plural
        return [
            asyncio.create_task(self.caches.pods.run(), name=f"informer-pods-{plural}"),
            asyncio.create_task(self.caches.services.run(), name=f"informer-services-{plural}"),
            *(
                asyncio.create_task(informer.run(), name=f"informer-{kind.plural}-{plural}")
                for kind, informer in self.caches.owned.items()
            ),
            asyncio.create_task(self.caches.jobs.run(), name=f"informer-{plural}"),
        ]

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
            structlog.contextvars.bind_contextvars(job=key, kind=self.kind.kind)
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
