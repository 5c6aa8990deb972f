"""One reconcile of one TFJob on Kubernetes: observe, ask the core, act, record.

The decisions are the core's (`tfjob.core.reconcile`); this module only turns a Plan
into API calls, in the order that keeps the cluster consistent:
- nothing is done for a job whose expectations are pending (the cache lags our own
  writes), or that is being deleted;
- a job whose spec the core cannot read, or whose first pods the API server refuses
  in a dry run (admission.py), is marked Failed instead of being retried forever;
- `status_first` plans write status before acting, because the status records a
  restart count read from a pod the actions delete;
- each create or delete raises its expectation before the request is sent;
- any other status change is handed to the StatusWriter, which writes it behind the
  creates and deletes (status_writer.py); decisions are made from the cached job with
  its unwritten status laid over it, and never while its status is on the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from tfjob.api import constants as c
from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.api.observed import Pod, Service
from tfjob.api.types import ObjectMeta, TFJob
from tfjob.core import conditions
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    Action,
    CreateGroup,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeleteJob,
    DeletePod,
    Plan,
    UpdateGroup,
)
from tfjob.core.reconcile import reconcile as decide
from tfjob.core.reconcile import reject
from tfjob.core.settings import Settings
from tfjob.runtimes.kubernetes.admission import DryRun
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient, RequestTimeout, TransportError
from tfjob.runtimes.kubernetes.decode import UndecodableJob
from tfjob.runtimes.kubernetes.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.expectations import Expectations, Kind
from tfjob.runtimes.kubernetes.gang import GangGroups
from tfjob.runtimes.kubernetes.handlers import JOB_INDEX
from tfjob.runtimes.kubernetes.informer import Informer
from tfjob.runtimes.kubernetes.metrics import Metrics
from tfjob.runtimes.kubernetes.resources import PODS, SERVICES, TFJOBS, Resource
from tfjob.runtimes.kubernetes.status_writer import StatusWriter

log = structlog.get_logger("tfjob.reconciler")

# What reading a malformed spec can raise (the model keeps pod templates as mappings).
_SPEC_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError)


class ActionsFailed(TemporaryError):
    """Some creates or deletes failed; the job is retried with backoff."""

    def __init__(self, errors: Sequence[Exception]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = list(errors)


class ActionsRefused(PermanentError):
    """Every failed create or delete was refused as sent (400/422, ApiError.refused):
    the same requests would be refused again, so the job is not retried until it
    changes (its FailedCreate Events say why)."""

    def __init__(self, errors: Sequence[Exception]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = list(errors)


def _failure(errors: Sequence[Exception]) -> ActionsFailed | ActionsRefused:
    """Refused if every error is a refusal; one error worth retrying retries them all."""
    if all(isinstance(e, ApiError) and e.refused for e in errors):
        return ActionsRefused(errors)
    return ActionsFailed(errors)


@dataclass(frozen=True)
class Result:
    """What one reconcile asks of the worker loop: look again after `requeue_after`
    seconds, or (None) only when a watch event says something changed.

    Failures are exceptions (tfjob.api.errors): the loop retries a TemporaryError and
    gives up on a PermanentError. The reconciler never touches the queue itself."""

    requeue_after: float | None = None


DONE = Result()


@dataclass
class Caches:
    jobs: Informer[TFJob | UndecodableJob]
    pods: Informer[Pod]
    services: Informer[Service]


class Reconciler:
    """Carries out the core's plans for one job at a time (per call)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        caches: Caches,
        expectations: Expectations,
        recorder: EventRecorder,
        metrics: Metrics,
        settings: Settings,
        status: StatusWriter,
        parallelism: int = 16,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        gang: GangGroups | None = None,
        dry_run: DryRun | None = None,
    ) -> None:
        self._client = client
        self._caches = caches
        self._expectations = expectations
        self._recorder = recorder
        self._metrics = metrics
        self._settings = settings
        self._status = status
        self._writes = status.writes  # statuses and Events yield to what is marked here
        self._parallelism = parallelism
        self._clock = clock
        self._gang = gang
        self._dry_run = dry_run or DryRun(client)

    async def reconcile(self, key: str) -> Result:
        """Bring job `key` one step closer to what the core wants; say when to look again."""
        # Not while its status is on the wire: once written, the cache holds it.
        await self._status.settled(key)
        cached = self._caches.jobs.get(key)
        if cached is None:
            self._expectations.forget(key)
            self._status.discard(key)
            return DONE
        if cached.metadata.deletion_timestamp is not None:
            return DONE
        if isinstance(cached, UndecodableJob):
            await self._reject(cached)
            return DONE
        if not self._expectations.satisfied(key):
            # The watch events we wait for will queue the job; this is only the
            # safety net for lost events (expectations expire).
            return Result(requeue_after=self._expectations.time_left(key) + 0.001)
        return await self._carry_out(key, cached)

    # -- one plan ---------------------------------------------------------------------

    async def _carry_out(self, key: str, cached: TFJob) -> Result:
        job = self._status.decided_from(key, cached)  # the latest decided status
        pods = self._caches.pods.by_index(JOB_INDEX, key)
        services = self._caches.services.by_index(JOB_INDEX, key)
        groups = await self._gang.observe(*key.split("/", 1)) if self._gang else []
        try:
            plan = decide(job, pods, services, self._clock(), self._settings, groups)
            renderer = PodRenderer(job, self._settings)  # the plan's pods, made as created
            refusal = await self._admission_refusal(job, bool(pods), plan, renderer)
        except _SPEC_ERRORS as error:
            # The core is pure: an exception means a spec it could not read. Retrying
            # would raise it again forever, so the job fails, naming what was read.
            refusal = f"its spec could not be read ({type(error).__name__}: {error})"
        if refusal is not None:
            await self._reject(cached, job, refusal)
            return DONE
        ref = _ref(job.metadata)
        await self._store_status(key, cached, plan, lambda: self._count(job, pods, plan))
        for event in plan.events:
            self._recorder.record(ref, event.type, event.reason, event.message)
        errors, job_deleted = await self._act(key, ref, plan.actions, renderer)
        if errors:
            raise _failure(errors)
        return Result(requeue_after=None if job_deleted else plan.requeue_after)

    async def _store_status(
        self, key: str, cached: TFJob, plan: Plan, count: Callable[[], None]
    ) -> None:
        """Write the plan's status now (`status_first`), or behind the actions.

        The metrics are counted once the status they follow from is stored. A job
        about to be deleted gets its pending status stored first (its last word, and
        the metrics counted with it); the plan's own status is not written, as there
        is nothing left to write it to.
        """
        deletes_job = any(isinstance(a, DeleteJob) for a in plan.actions)
        if deletes_job:
            await self._status.write_pending(key)
        if plan.status_changed and plan.status_first:
            await self._status.write(cached, plan.status, count)
        elif plan.status_changed and not deletes_job:
            creates = any(isinstance(a, CreatePod | CreateService) for a in plan.actions)
            self._status.defer(cached, plan.status, count, with_creates=creates)
        else:
            count()

    def _count(self, job: TFJob, pods: list[Pod], plan: Plan) -> None:
        ns = job.metadata.namespace
        if not conditions.is_finished(job.status):
            failed = sum(1 for p in pods if p.status.phase == "Failed")
            if failed:
                self._metrics.failed_pods.inc(failed)
        for condition_type, counter in (
            (c.SUCCEEDED, self._metrics.jobs_successful),
            (c.FAILED, self._metrics.jobs_failed),
        ):
            if conditions.is_true(plan.status, condition_type) and not conditions.is_true(
                job.status, condition_type
            ):
                self._metrics.job(counter, ns)
        for event in plan.events:
            if event.reason == "TFJobRestarting":
                self._metrics.job(self._metrics.jobs_restarted, ns)

    # -- actions ----------------------------------------------------------------------

    async def _act(
        self, key: str, ref: ObjectRef, actions: Sequence[Action], pods: PodRenderer
    ) -> tuple[list[Exception], bool]:
        """Carry out `actions` in order; runs of creates/deletes go out concurrently."""
        errors: list[Exception] = []
        gate = asyncio.Semaphore(self._parallelism)

        async def bounded(action: Action) -> Exception | None:
            async with gate:
                return await self._one(key, ref, action, pods)

        job_deleted = False
        for wave in _waves(actions):
            with self._writes.acting():  # statuses and Events wait behind these
                if len(wave) == 1:
                    results = [await self._one(key, ref, wave[0], pods)]
                else:
                    results = await asyncio.gather(*(bounded(a) for a in wave))
            errors += [r for r in results if r is not None]
            job_deleted = job_deleted or (isinstance(wave[0], DeleteJob) and not results[0])
        return errors, job_deleted

    async def _one(
        self, key: str, ref: ObjectRef, action: Action, pods: PodRenderer
    ) -> Exception | None:
        if isinstance(action, CreatePod | CreateService):
            return await self._create(key, ref, action, pods)
        if isinstance(action, DeleteJob):
            return await self._delete_job(ref)
        if isinstance(action, CreateGroup | UpdateGroup | DeleteGroup):
            assert self._gang is not None, "group actions only come with gang scheduling on"
            return await self._gang.act(ref, action)
        return await self._delete(key, ref, action)

    async def _create(
        self, key: str, ref: ObjectRef, action: CreatePod | CreateService, pods: PodRenderer
    ) -> Exception | None:
        kind, resource, noun = _what(action)
        name = action.name
        self._expectations.expect_create(key, kind, name)
        try:
            manifest = pods.manifest(action) if isinstance(action, CreatePod) else action.manifest
            await self._client.create(resource, ref.namespace, manifest)
        except ApiError as error:
            self._expectations.created(key, kind, name)
            if error.already_exists:
                return None  # fixed names: it is there, which is what we wanted
            return self._create_failed(ref, noun, error)
        except RequestTimeout:
            # As upstream: the request may have gone through; the watch will tell.
            return None
        except TransportError as error:
            self._expectations.created(key, kind, name)
            return self._create_failed(ref, noun, error)
        capital = noun.capitalize()
        self._recorder.record(
            ref, "Normal", f"SuccessfulCreate{capital}", f"Created {noun}: {name}"
        )
        if kind == "pods":
            self._metrics.created_pods.inc()
        else:
            self._metrics.services_created.inc()
        return None

    def _create_failed(self, ref: ObjectRef, noun: str, error: Exception) -> Exception:
        self._recorder.record(
            ref, "Warning", f"FailedCreate{noun.capitalize()}", f"Error creating: {error}"
        )
        if noun == "service":
            self._metrics.services_failed.inc()
        return error

    async def _delete(self, key: str, ref: ObjectRef, action: Action) -> Exception | None:
        kind, resource, noun = _what(action)
        name = action.name  # type: ignore[union-attr]
        self._expectations.expect_delete(key, kind, name)
        try:
            existed = await self._client.delete(resource, ref.namespace, name)
        except (ApiError, TransportError) as error:
            self._expectations.deleted(key, kind, name)
            self._recorder.record(
                ref, "Warning", f"FailedDelete{noun.capitalize()}", f"Error deleting: {error}"
            )
            return error
        if not existed and not self._cached(resource, ref.namespace, name):
            # Already gone and already out of the cache: no watch event will come.
            self._expectations.deleted(key, kind, name)
        if kind == "pods":
            self._metrics.deleted_pods.inc()
        self._recorder.record(
            ref, "Normal", f"SuccessfulDelete{noun.capitalize()}", f"Deleted {noun}: {name}"
        )
        return None

    def _cached(self, resource: Resource, namespace: str, name: str) -> bool:
        informer: Informer[Any] = self._caches.pods if resource is PODS else self._caches.services
        obj = informer.get(f"{namespace}/{name}")
        return obj is not None and obj.metadata.deletion_timestamp is None

    async def _delete_job(self, ref: ObjectRef) -> Exception | None:
        try:
            await self._client.delete(TFJOBS, ref.namespace, ref.name)
        except (ApiError, TransportError) as error:
            self._recorder.record(ref, "Warning", "FailedDeleteJob", f"Error deleting: {error}")
            return error
        self._recorder.record(ref, "Normal", "SuccessfulDeleteJob", f"Deleted job: {ref.name}")
        self._metrics.job(self._metrics.jobs_deleted, ref.namespace)
        return None

    # -- jobs the model cannot read ---------------------------------------------------

    async def _admission_refusal(
        self, job: TFJob, has_pods: bool, plan: Plan, pods: PodRenderer
    ) -> str | None:
        """The API server's refusal of this job's first pods (admission.py), if any."""
        uid = job.metadata.uid
        if not self._dry_run.needed(uid, has_pods, plan.actions):
            return None
        return await self._dry_run.refusal(job.metadata, plan.actions, pods)

    async def _reject(
        self, cached: TFJob | UndecodableJob, job: TFJob | None = None, problems: str = ""
    ) -> None:
        """Mark a TFJob that cannot run Failed, naming the field, instead of retrying
        it forever (the core decides the condition and the event)."""
        if isinstance(cached, UndecodableJob):
            job, problems = TFJob(metadata=cached.metadata, status=cached.status), cached.error
        assert job is not None
        plan = reject(job, self._clock(), problems)
        ref = _ref(job.metadata)
        for event in plan.events:
            self._recorder.record(ref, event.type, event.reason, event.message)
        if plan.status_changed:
            await self._status.write(cached, plan.status, lambda: self._count(job, [], plan))


def _waves(actions: Sequence[Action]) -> list[list[Action]]:
    """Maximal runs of pod/service actions (order-free among themselves); a DeleteJob
    or a gang group action stands alone, after everything before it."""
    waves: list[list[Action]] = []
    for action in actions:
        if _alone(action) or not waves or _alone(waves[-1][0]):
            waves.append([action])
        else:
            waves[-1].append(action)
    return waves


def _alone(action: Action) -> bool:
    return isinstance(action, DeleteJob | CreateGroup | UpdateGroup | DeleteGroup)


def _what(action: Action) -> tuple[Kind, Resource, str]:
    if isinstance(action, CreatePod | DeletePod):
        return "pods", PODS, "pod"
    return "services", SERVICES, "service"


def _ref(meta: ObjectMeta) -> ObjectRef:
    return ObjectRef(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
    )
