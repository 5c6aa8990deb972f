"""One reconcile of one job on Kubernetes: observe, ask the core, act, record.

The decisions are the core's (`tfjob.core.reconcile`); this module reads one job's
view from the caches (consistency.py), turns the Plan into API calls in the order
that keeps the cluster consistent, and hands the caches what it wrote:
- nothing is done for a job whose view is held (the caches lag our own writes), or
  that is being deleted;
- a job whose spec the core cannot read, or whose first pods the API server refuses
  in a dry run (dry_run.py), is marked Failed instead of being retried forever;
- the status is written once, where the plan needs it (`_steps`): before the actions
  when it records what they destroy (`status_first`: a restart counted from a pod the
  actions delete), before deleting the job (its last word), otherwise after them (a
  job's pods come before the status that describes them);
- a failed status write stops the actions after it, and so does a queued job's failed
  `SetSuspend` (the plan's first action, conditional on the job as read: a 409 means
  the job changed, and the rest of the plan assumed it suspended or started).
docs/consistency.md lists the rules and what each one guards.
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
from tfjob.api.observed import Pod
from tfjob.api.types import Job, ObjectMeta
from tfjob.core import conditions, queued
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    Action,
    CreateOwned,
    CreatePod,
    CreateService,
    DeleteJob,
    DeletePod,
    DeleteService,
    Plan,
    SetSuspend,
    UpdateOwned,
)
from tfjob.core.reconcile import reconcile as decide
from tfjob.core.reconcile import reject
from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.consistency import Held, JobCaches, JobView
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.dry_run import DryRun
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.status_writer import StatusConflict, StatusWriter
from tfjob.runtimes.kubernetes.controller.writes import Writer
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.decode import UndecodableJob
from tfjob.runtimes.kubernetes.transport.resources import jobs_of

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


def actions_failure(errors: Sequence[Exception]) -> ActionsFailed | ActionsRefused:
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


@dataclass(frozen=True)
class WriteStatus:
    """The plan's status write, as a step among its actions (see `_steps`)."""


Step = Action | WriteStatus


class Reconciler:
    """Carries out the core's plans for one kind's jobs, one job at a time (per call)."""

    def __init__(
        self,
        *,
        kind: Framework[Any],
        client: KubeClient,
        caches: JobCaches,
        recorder: EventRecorder,
        metrics: Metrics,
        settings: Settings,
        writes: ReconcileWrites,
        parallelism: int = 16,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        dry_run: DryRun | None = None,
    ) -> None:
        self._kind = kind
        self._jobs = jobs_of(kind)
        self._caches = caches
        self._status = StatusWriter(client, kind)
        self._recorder = recorder
        self._metrics = metrics
        self._settings = settings
        self._parallelism = parallelism
        self._clock = clock
        self._dry_run = dry_run or DryRun(client)
        self._writer = Writer(kind, client, recorder, metrics, writes)

    async def reconcile(self, key: str) -> Result:
        """Bring job `key` one step closer to what the core wants; say when to look again."""
        view = self._caches.view(key)
        if view is None:
            return await self._release_orphans(key)
        if isinstance(view, Held):
            # The watch event that catches the caches up queues the job; this is only
            # the safety net for a lost one.
            return Result(requeue_after=view.seconds + 0.001)
        if view.job.metadata.deletion_timestamp is not None:
            return DONE
        try:
            return await self._carry_out(view)
        finally:
            self._caches.hold(view)

    async def _release_orphans(self, key: str) -> Result:
        """The job is gone: its Workloads left behind (--kueue-integration=external)
        are finished, then let go (core/queued.py `orphaned`), through the one write
        path. A Workload's change queues the gone job's key, so each write brings
        the next; nothing is held (there is no job to hold)."""
        workloads = [w.document for w in self._caches.workloads_of(key)]
        actions = queued.orphaned(workloads, self._clock())
        if not actions:
            return DONE
        namespace, _, name = key.partition("/")
        gone = self._kind.job_type(metadata=ObjectMeta(namespace=namespace, name=name))
        view, ref = JobView(key, gone, [], []), self._ref(gone.metadata)
        errors = []
        for action in actions:
            error = await self._writer.apply(view, ref, self._writer.write_of(action, ref))
            if error is not None:
                errors.append(error)
        if errors:
            raise actions_failure(errors)
        return DONE

    # -- one plan ---------------------------------------------------------------------

    async def _carry_out(self, view: JobView) -> Result:
        job = view.job
        if isinstance(job, UndecodableJob):
            readable = self._kind.job_type(metadata=job.metadata, status=job.status)
            await self._reject(view, readable, job.error)
            return DONE
        try:
            plan = decide(
                job,
                view.pods,
                view.services,
                self._clock(),
                self._settings,
                view.groups,
                view.owned,
                **self._queueing(view, job),
            )
            # The plan's pods, made as created (from its replica specs when it has its own).
            renderer = PodRenderer(job, self._settings, plan.replica_specs)
            check = self._dry_run.needed(job.metadata.uid, bool(view.pods), plan.actions)
            # With owned objects to write, the first pods' dry run comes after them (an
            # MPIJob launcher's ServiceAccount must exist for the API server to admit
            # it); otherwise before anything is done.
            later = check and any(isinstance(a, CreateOwned | UpdateOwned) for a in plan.actions)
            refusal = None
            if check and not later:
                refusal = await self._dry_run.refusal(job.metadata, plan.actions, renderer)
        except _SPEC_ERRORS as error:
            refusal = self._unreadable(error)
        if refusal is not None:
            await self._reject(view, job, refusal)
            return DONE
        ref = self._ref(job.metadata)
        for event in plan.events:
            self._recorder.record(ref, event.type, event.reason, event.message)
        if not plan.status_changed:
            self._count(job, view.pods, plan)
        errors, refusal = await self._act(view, ref, plan, renderer, later)
        if refusal is not None:
            await self._reject(view, job, refusal)
            return DONE
        if errors:
            raise actions_failure(errors)
        return Result(requeue_after=plan.requeue_after)

    def _queueing(self, view: JobView, job: Job) -> dict[str, Any]:
        """What a queued job's pass reads besides the view's Workloads (core/queued.py):
        the ResourceFlavors and the priority its Workload is made with, from the
        caches of --kueue-integration=external; nothing in builtin mode."""
        kueue = self._caches.kueue
        if kueue is None:
            return {}
        wanted = queued.priority_to_resolve(job, self._settings)
        return {
            "workloads": view.workloads,
            "flavors": kueue.flavors_by_name(),
            "priority": kueue.resolve(wanted),
        }

    @staticmethod
    def _unreadable(error: Exception) -> str:
        # The core is pure: an exception means a spec it could not read. Retrying
        # would raise it again forever, so the job fails, naming what was read.
        return f"its spec could not be read ({type(error).__name__}: {error})"

    async def _write_status(self, view: JobView, job: Job, plan: Plan) -> None:
        """Write the plan's status; the metrics that follow from it are counted once
        it is stored."""
        try:
            version = await self._status.write(job.metadata, job.status, plan.status)
        except StatusConflict as conflict:
            view.wrote(self._jobs, conflict.resource_version)
            raise
        if version is not None:
            view.wrote(self._jobs, version)
            self._count(job, view.pods, plan)

    def _count(self, job: Job, pods: list[Pod], plan: Plan) -> None:
        ns, framework = job.metadata.namespace, self._kind.metrics_name
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
                self._metrics.job(counter, ns, framework)
        restarting = self._kind.reason("Restarting")
        for event in plan.events:
            if event.reason == restarting:
                self._metrics.job(self._metrics.jobs_restarted, ns, framework)

    # -- actions ----------------------------------------------------------------------

    async def _act(
        self, view: JobView, ref: ObjectRef, plan: Plan, pods: PodRenderer, check: bool
    ) -> tuple[list[Exception], str | None]:
        """Carry out the plan's steps in order, each action through the one write path
        (writes.py); runs of pod and service writes go out concurrently. A failed
        status write ends the plan there. `check`: the job's first pods are dry-run
        before the first wave that creates pods; a refusal (returned second) ends the
        plan there."""
        errors: list[Exception] = []
        gate = asyncio.Semaphore(self._parallelism)

        async def bounded(action: Action) -> Exception | None:
            async with gate:
                return await self._writer.apply(view, ref, self._writer.write_of(action, ref, pods))

        for wave in _waves(_steps(plan)):
            first = wave[0]
            if isinstance(first, WriteStatus):
                assert isinstance(view.job, Job)
                await self._write_status(view, view.job, plan)
                continue
            if check and not _alone(first):
                check = False
                assert isinstance(view.job, Job)
                try:
                    refusal = await self._dry_run.refusal(view.job.metadata, plan.actions, pods)
                except _SPEC_ERRORS as error:
                    refusal = self._unreadable(error)
                if refusal is not None:
                    return errors, refusal
            results = await asyncio.gather(*(bounded(a) for a in wave))  # type: ignore[arg-type]
            errors += [r for r in results if r is not None]
            if errors and isinstance(first, SetSuspend):
                break  # the rest assumes the job (un)suspended: reconcile it again
        return errors, None

    # -- jobs the model cannot read ---------------------------------------------------

    def _ref(self, meta: ObjectMeta) -> ObjectRef:
        """The job as Events name it: its kind's, reported by its kind's controller."""
        return ObjectRef(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            resource_version=meta.resource_version,
            kind=self._kind.kind,
            api_version=self._kind.api_version,
            reporter=self._kind.controller_name,
        )

    async def _reject(self, view: JobView, job: Job, problems: str) -> None:
        """Mark a job that cannot run Failed, naming the field, instead of retrying
        it forever (the core decides the condition and the event)."""
        plan = reject(job, self._clock(), problems)
        ref = self._ref(job.metadata)
        for event in plan.events:
            self._recorder.record(ref, event.type, event.reason, event.message)
        if plan.status_changed:
            await self._write_status(view, job, plan)


def _steps(plan: Plan) -> list[Step]:
    """The plan's actions with its status write where it must go (module docstring)."""
    actions: list[Step] = list(plan.actions)
    if not plan.status_changed:
        return actions
    write = WriteStatus()
    if plan.status_first:
        # A queued job's SetSuspend stays first: it is conditional on the job as read.
        lead = 1 if actions and isinstance(actions[0], SetSuspend) else 0
        return [*actions[:lead], write, *actions[lead:]]
    for at, action in enumerate(actions):
        if isinstance(action, DeleteJob):
            return [*actions[:at], write, *actions[at:]]
    return [*actions, write]


def _waves(steps: Sequence[Step]) -> list[list[Step]]:
    """Maximal runs of pod/service actions (order-free among themselves); a status
    write, a DeleteJob, a gang group action or an owned-object action stands alone,
    after everything before it (an MPIJob's RoleBinding can only be made once its
    Role exists: the API server checks the binder holds what the Role grants)."""
    waves: list[list[Step]] = []
    for step in steps:
        if _alone(step) or not waves or _alone(waves[-1][0]):
            waves.append([step])
        else:
            waves[-1].append(step)
    return waves


def _alone(step: Step) -> bool:
    """Every step but a pod or service create/delete: a status write, a DeleteJob, a
    gang group or owned object action."""
    return not isinstance(step, CreatePod | DeletePod | CreateService | DeleteService)
