"""What each cache change means: which job to reconcile.

Kept apart from the informer (which knows nothing about jobs) and from the
reconciler (which only reads the caches), so the wiring is in one place. Every change
of a job, or of a pod or service it owns, queues the job: level-triggered, the
reconcile reads whatever the caches hold then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.runtimes.kubernetes.cache.consistency import JobCaches
from tfjob.runtimes.kubernetes.cache.informer import Handlers, key_of
from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.transport.decode import CachedJob

Owned = TypeVar("Owned", Pod, Service, OwnedObject)


@dataclass
class Wiring:
    """One kind's caches to its queue."""

    caches: JobCaches
    queue: WorkQueue
    recorder: EventRecorder
    metrics: Metrics

    def wire(self) -> None:
        self.caches.jobs.add_handlers(self.job_handlers())
        self.caches.pods.add_handlers(self.owned_handlers(Pod))
        self.caches.services.add_handlers(self.owned_handlers(Service))
        for informer in self.caches.owned.values():
            informer.add_handlers(self.owned_handlers(OwnedObject))

    def job_handlers(self) -> Handlers[CachedJob]:
        return Handlers(
            on_add=self._job_added, on_update=self._job_updated, on_delete=self._job_deleted
        )

    def owned_handlers(self, _type: type[Owned]) -> Handlers[Owned]:
        """Handlers for the pods (services, other owned objects) cache; `_type` only
        pins the type."""

        def changed(obj: Owned) -> None:
            job = self.caches.owning_job(obj)
            if job is not None:
                self.queue.add(job)

        return Handlers(on_add=changed, on_update=lambda _old, new: changed(new), on_delete=changed)

    def _job_added(self, job: CachedJob) -> None:
        # A job seen for the first time (or relisted) waits behind reactions of jobs
        # already reconciled: see workqueue.py.
        framework = self.caches.kind.metrics_name
        self.metrics.job(self.metrics.jobs_created, job.metadata.namespace, framework)
        self.queue.add_new(key_of(job))

    def _job_updated(self, _old: CachedJob, new: CachedJob) -> None:
        self.queue.add(key_of(new))

    def _job_deleted(self, job: CachedJob) -> None:
        self.recorder.forget_object(job.metadata.uid)
        self.queue.add(key_of(job))
