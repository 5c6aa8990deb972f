"""What each cache change means: which job to reconcile, which expectation it meets.

Kept apart from the informer (which knows nothing about TFJobs) and from the
reconciler (which only reads the caches), so the wiring is in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from tfjob.api import constants as c
from tfjob.api.observed import Pod, Service
from tfjob.runtimes.kubernetes.decode import CachedJob
from tfjob.runtimes.kubernetes.events import EventRecorder
from tfjob.runtimes.kubernetes.expectations import Expectations, Kind
from tfjob.runtimes.kubernetes.informer import Handlers, key_of, object_key
from tfjob.runtimes.kubernetes.metrics import Metrics
from tfjob.runtimes.kubernetes.workqueue import WorkQueue

JOB_INDEX = "job"
Owned = TypeVar("Owned", Pod, Service)


def owning_job(obj: Pod | Service) -> str | None:
    """`namespace/name` of the TFJob a pod or service belongs to.

    The controller ownerReference decides; an object controlled by something else is
    not ours. Without one, the job-name label names the job (so a job still sees, and
    never duplicates, a labelled object whose ownerReference was lost).
    """
    meta = obj.metadata
    for ref in meta.owner_references:
        if ref.controller:
            if ref.kind == c.KIND and ref.api_version == c.API_VERSION:
                return object_key(meta.namespace, ref.name)
            return None
    label = meta.labels.get(c.LABEL_JOB_NAME)
    return object_key(meta.namespace, label) if label else None


@dataclass
class Wiring:
    queue: WorkQueue
    expectations: Expectations
    recorder: EventRecorder
    metrics: Metrics

    def job_handlers(self) -> Handlers[CachedJob]:
        return Handlers(
            on_add=self._job_added, on_update=self._job_updated, on_delete=self._job_deleted
        )

    def owned_handlers(self, kind: Kind, _type: type[Owned]) -> Handlers[Owned]:
        """Handlers for the pods (or services) cache; `_type` only pins the type."""

        def added(obj: Owned) -> None:
            self._observed(kind, obj, created=True)

        def updated(old: Owned, new: Owned) -> None:
            if old.metadata.resource_version != new.metadata.resource_version:
                self._observed(kind, new, created=False)

        def deleted(obj: Owned) -> None:
            job = owning_job(obj)
            if job is not None:
                self.expectations.deleted(job, kind, obj.metadata.name)
                self.queue.add(job)

        return Handlers(on_add=added, on_update=updated, on_delete=deleted)

    def _observed(self, kind: Kind, obj: Pod | Service, *, created: bool) -> None:
        job = owning_job(obj)
        if job is None:
            return
        if created:
            self.expectations.created(job, kind, obj.metadata.name)
        if obj.metadata.deletion_timestamp is not None:
            # Terminating counts as deleted: the core already treats it as going away.
            self.expectations.deleted(job, kind, obj.metadata.name)
        self.queue.add(job)

    def _job_added(self, job: CachedJob) -> None:
        # A job seen for the first time (or relisted) waits behind reactions of jobs
        # already reconciled: see workqueue.py.
        self.metrics.job(self.metrics.jobs_created, job.metadata.namespace)
        self.queue.add_new(key_of(job))

    def _job_updated(self, old: CachedJob, new: CachedJob) -> None:
        # Our own status writes are already in the cache (written through), so their
        # watch events carry no news and do not cost a reconcile.
        if old.metadata.resource_version != new.metadata.resource_version:
            self.queue.add(key_of(new))

    def _job_deleted(self, job: CachedJob) -> None:
        self.recorder.forget_object(job.metadata.uid)
        self.queue.add(key_of(job))
