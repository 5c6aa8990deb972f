"""What each cache change means: which job, of which kind, to reconcile.

Kept apart from the informers (which know nothing about jobs) and from the
reconciler (which only reads the caches), so the wiring is in one place. Every change
of a job, or of an object it owns, queues the job in its kind's queue: level-triggered,
the reconcile reads whatever the caches hold then. A shared cache's change is routed
by its owner index (shared.py `Owners`): one lookup, one queue, whichever kind it is.
TrainJobs (`wire_trainjobs`): a TrainJob's change, its JobSet's (by the owner index)
and a change of the runtime it names queue it in the TrainJob controller's queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tfjob.api import trainjob as tj
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob
from tfjob.core.trainjob import status as trainjob_status
from tfjob.runtimes.kubernetes.cache.informer import Handlers, key_of
from tfjob.runtimes.kubernetes.cache.owner_index import split_owner
from tfjob.runtimes.kubernetes.cache.shared import Owned, Owners, SharedInformers
from tfjob.runtimes.kubernetes.cache.trainer_informers import TrainJobInformers, trainjob_owner
from tfjob.runtimes.kubernetes.cache.trainjobs import TrainJobCaches
from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.transport.decode import CachedJob
from tfjob.runtimes.kubernetes.transport.resources import JOBSETS, TRAINJOBS
from tfjob.runtimes.kubernetes.transport.trainer_decode import CachedJobSet


def jobset_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What a JobSet's update changed of what a TrainJob's pass reads of it
    (core/trainjob: status.py, reconcile.py): NOTHING (a status field no pass reads,
    as `restarts` or `terminalState`), COUNTS (its replicated jobs' counts only) or
    MORE (a condition, Completed or Failed; the spec; the metadata)."""
    before, after = _read(old), _read(new)
    if before == after:
        return NOTHING
    return COUNTS if before[:-1] == after[:-1] else MORE


NOTHING, COUNTS, MORE = "nothing", "counts", "more"


def _first_counts_wait(caches: TrainJobCaches, key: str, jobset: CachedJobSet) -> float | None:
    """When a JobSet's change of counts alone would make a pass of TrainJob `key`
    wait (its first counts, every one 0: core/trainjob/status.py), the seconds the
    pass would wait; else None. A pass that would only wait is not made now."""
    trainjob = caches.informers.trainjobs.get(key)
    if trainjob is None:
        return None
    now = datetime.now(UTC)
    status = trainjob.status
    counted = trainjob_status.from_jobset(status, jobset.document, now)
    return trainjob_status.first_counts_wait(status, counted, jobset.document, now)


def _read(document: dict[str, Any]) -> tuple[Any, ...]:
    metadata = document.get("metadata") or {}
    status = document.get("status") or {}
    return (
        {k: v for k, v in metadata.items() if k != "resourceVersion"},
        document.get("spec"),
        status.get("conditions") or None,  # none and [] read the same
        status.get("replicatedJobsStatus") or None,
    )


@dataclass
class Router:
    """The shared caches to the kinds' queues."""

    shared: SharedInformers
    queues: Mapping[str, WorkQueue]  # by kind name
    recorder: EventRecorder

    def wire(self) -> None:
        for name, informer in self.shared.jobs.items():
            informer.add_handlers(self.job_handlers(self.queues[name]))
        owned: Handlers[Any] = self.owned_handlers(self.shared.owners)
        for shared in self.shared.owned_informers():
            shared.add_handlers(owned)

    def wire_trainjobs(self, caches: TrainJobCaches, queue: WorkQueue) -> None:
        """TrainJobs, their JobSets and the runtimes to the TrainJob controller's queue;
        the events of our own writes queue nothing (trainjobs.py `ours`)."""
        informers = caches.informers
        handlers = self.job_handlers(queue)

        def trainjob(new: TrainJob) -> None:
            key = key_of(new)
            if not caches.ours(key, TRAINJOBS, new.metadata.resource_version):
                queue.add(key)

        def trainjob_added(new: TrainJob) -> None:
            if informers.trainjobs.synced.is_set():  # created now, not listed at start
                caches.created(key_of(new), new.metadata.uid)
            handlers.on_add(new)

        informers.trainjobs.add_handlers(
            Handlers(
                on_add=trainjob_added,
                on_update=lambda _old, new: trainjob(new),
                on_delete=handlers.on_delete,
            )
        )

        def jobset(obj: CachedJobSet, deleted: bool = False) -> None:
            owner = trainjob_owner(obj)
            if owner is None:
                return
            key = split_owner(owner)[1]
            if deleted or not caches.ours(key, JOBSETS, obj.metadata.resource_version):
                queue.add(key)

        def jobset_updated(old: CachedJobSet, new: CachedJobSet) -> None:
            """A change no pass reads queues nothing; a change of the counts alone
            waits behind the TrainJobs not yet reconciled (their JobSets first, and a
            JobSet that ends meanwhile moves it up: its counts are written with its
            end, one status write), or, the JobSet's first counts all 0, until the
            pass would write them; any other change is a reaction."""
            owner = trainjob_owner(new)
            if owner is None:
                return
            key = split_owner(owner)[1]
            if caches.waiting(key):
                queue.add(key)
                return
            if caches.ours(key, JOBSETS, new.metadata.resource_version):
                return
            # The same kept JSON: nothing a pass reads changed (no decoding needed).
            same = old.kept == new.kept
            change = NOTHING if same else jobset_change(old.document, new.document)
            if change == COUNTS:
                wait = _first_counts_wait(caches, key, new)
                if wait is None:
                    queue.add_new(key)
                else:  # the pass would only wait for the next counts (status.py)
                    queue.add_after(key, wait)
            elif change == MORE:
                queue.add(key)

        informers.jobsets.add_handlers(
            Handlers(
                on_add=jobset,
                on_update=jobset_updated,
                on_delete=lambda obj: jobset(obj, deleted=True),
            )
        )
        for kind, runtimes in (
            (tj.TRAINING_RUNTIME, informers.runtimes),
            (tj.CLUSTER_TRAINING_RUNTIME, informers.cluster_runtimes),
        ):
            runtimes.add_handlers(self._runtime_handlers(informers, kind, queue))

    @staticmethod
    def _runtime_handlers(
        informers: TrainJobInformers, kind: str, queue: WorkQueue
    ) -> Handlers[TrainingRuntime]:
        """A runtime made, changed or deleted: every TrainJob naming it is reconciled
        (one that waits for it, or is suspended, may now go on: core/trainjob)."""

        def changed(runtime: TrainingRuntime) -> None:
            for key in informers.users(kind, runtime):
                queue.add(key)

        return Handlers(on_add=changed, on_update=lambda _old, new: changed(new), on_delete=changed)

    def job_handlers(self, queue: WorkQueue) -> Handlers[Any]:
        def added(job: CachedJob) -> None:
            # A job seen for the first time (or relisted) waits behind reactions of
            # jobs already reconciled: see workqueue.py. (Its metrics: lifecycle.py.)
            queue.add_new(key_of(job))

        def deleted(job: CachedJob) -> None:
            self.recorder.forget_object(job.metadata.uid)
            queue.add(key_of(job))

        return Handlers(
            on_add=added, on_update=lambda _old, new: queue.add(key_of(new)), on_delete=deleted
        )

    def owned_handlers(self, owners: Owners) -> Handlers[Owned]:
        """Handlers for a shared cache of jobs' objects: queue the owning job (both
        owners when an update moved an object from one job to another)."""

        def changed(obj: Owned) -> None:
            owner = owners(obj)
            if owner is not None:
                kind, job = split_owner(owner)
                self.queues[kind].add(job)

        def updated(old: Owned, new: Owned) -> None:
            changed(new)
            if owners(old) != owners(new):
                changed(old)

        return Handlers(on_add=changed, on_update=updated, on_delete=changed)
