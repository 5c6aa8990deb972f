"""A queued job's pass when tfjob makes its Kueue Workload (`--kueue-integration=external`).

With Kueue configured with `integrations.externalFrameworks` for the job's kind, Kueue
neither makes the Workload of a job that names a LocalQueue nor suspends or starts the
job: that part of its job framework is tfjob's. This module is that part of one
reconcile, in the order Kueue v0.19.0's job reconciler (jobframework reconciler.go)
takes it, from the decisions of `core/queueing`:

1. one Workload describes the job (`sync_workloads`): it is created (once no pod is
   active), rewritten or moved to the job's queue, and every other one deleted, its
   finalizer first;
2. a finished Workload lets its finalizer go; one being deleted stops the job and
   lets it go;
3. the job ended: its Workload finishes (`finished_condition`), quota released;
4. PodsReady follows the job's Running condition (`pods_ready_condition`);
5. evicted, or not admitted while the job runs (`stop`): the job is suspended, and an
   evicted job's quota goes back once its pods are gone (`quota_release`);
6. admitted (`admission`): the job runs as admitted (`pod_set_info`, `inject`): each
   replica type with the count Kueue admitted, its template with the flavors' node
   labels and tolerations and the labels and annotations Kueue's pods carry.

A MultiKueue worker's copy of a job names a prebuilt Workload (made by the manager's
MultiKueue): step 1 then takes that one (`sync_prebuilt`) and makes or deletes none;
the job waits while it is not there. On the manager, a job with `spec.managedBy`
kueue.x-k8s.io/multikueue (`dispatched`) has the whole pass, but nothing else of a
reconcile: it runs on the worker.

The job's `runPolicy.suspend` is the gate Kueue's webhook and job reconciler keep: the
plan sets it where Kueue would (`SetSuspend`), and the pass already treats the job as
suspended (no pods, services or gang groups; Suspended) or running. Where Kueue
writes an admission into the job's templates and replicas, tfjob leaves the stored job
alone and makes the pods from the admitted replica specs (`Plan.replica_specs`). At
most one write per Workload per pass (Kueue too returns after each): the next comes
with the watch event the write causes. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from tfjob.api.observed import OwnedObject
from tfjob.api.types import Job, ReplicaSpec
from tfjob.core.objects import with_replica_specs
from tfjob.core.plan import (
    Action,
    CreateGroup,
    DeleteGroup,
    GroupKind,
    SetSuspend,
    UpdateGroup,
    UpdateGroupStatus,
)
from tfjob.core.queueing import (
    POD_PRIORITY_CLASS,
    Admission,
    FlavorNotFound,
    PodSetInfo,
    Priority,
    PriorityClass,
    Stop,
    WorkloadError,
    admission,
    failed_to_start,
    finished_condition,
    inject,
    orphan_condition,
    out_of_sync_condition,
    pod_set_info,
    pods_ready_condition,
    prebuilt_workload_name,
    queue_name,
    quota_release,
    releases_finalizer,
    set_condition,
    stop,
    sync_prebuilt,
    sync_workloads,
    wanted_priority_class,
)
from tfjob.core.queueing.lifecycle import finished
from tfjob.core.queueing.names import FINALIZER, GROUP, MULTIKUEUE
from tfjob.core.queueing.placement import is_true
from tfjob.core.settings import Settings

if TYPE_CHECKING:
    from tfjob.core.pass_state import Pass

#: A queued job's Workload, written with the group actions (CreateGroup, UpdateGroup,
#: UpdateGroupStatus, DeleteGroup) in plan order.
WORKLOAD: Final = GroupKind(GROUP, "v1beta2", "Workload", "workloads")
#: While an admission names a ResourceFlavor not yet observed, look again this often.
FLAVOR_RECHECK_SECONDS: Final = 1.0
#: While the job's priority class is not found, look again this often.
PRIORITY_RECHECK_SECONDS: Final = 10.0
#: While the prebuilt Workload a job names is not observed, look again this often.
PREBUILT_RECHECK_SECONDS: Final = 1.0


class PriorityNotFound(NamedTuple):
    """No class of `priority_to_resolve`'s name exists (yet): Kueue makes no Workload
    until one does, and neither does tfjob."""

    wanted: PriorityClass


def queued_here(job: Job, settings: Settings) -> bool:
    """Whether tfjob keeps the job's Workload: the operator runs with
    `--kueue-integration=external` and the job names a LocalQueue."""
    return settings.kueue_integration == "external" and queue_name(job) is not None


def dispatched(job: Job, settings: Settings) -> bool:
    """Whether the job is a MultiKueue job on the manager cluster: queued by tfjob
    and with `spec.managedBy` kueue.x-k8s.io/multikueue. Its Workload is made and
    kept as any queued job's, so that Kueue's MultiKueue admission check can
    dispatch it, and it is suspended and started as admitted; but it runs on a
    worker cluster, whose status Kueue copies onto it: here it gets no pods,
    services or gang groups, and no status of tfjob's (core/reconcile.py)."""
    return queued_here(job, settings) and job.spec.managed_by == MULTIKUEUE


def priority_to_resolve(job: Job, settings: Settings) -> PriorityClass | None:
    """The priority class the runtime looks up before reconciling `job`, passed to
    `reconcile` as `priority`: a `Priority` (the class's name and value), or
    `PriorityNotFound` when no class of that name exists. An empty name: the job
    names none, so the cluster's default PriorityClass (the globalDefault one of
    least value), or `priority=None` when there is none (priority 0). None: nothing
    to look up (the job is not queued by tfjob)."""
    if not queued_here(job, settings):
        return None
    return wanted_priority_class(job) or PriorityClass(POD_PRIORITY_CLASS, "")


def begin(
    state: Pass,
    stored: Job,
    workloads: Sequence[OwnedObject],
    flavors: Mapping[str, Mapping[str, Any]] | None,
    priority: Priority | PriorityNotFound | None,
) -> list[Action]:
    """The Workload writes and job-spec change a queued job's pass starts with (empty
    for a job tfjob does not queue), having made `state.job` the job as Kueue would
    have it (suspended, or running with the admitted replica specs, also in
    `state.replica_specs`) and recorded Kueue's events. `stored`: the job as stored
    (not defaulted: its Workload copies the templates as stored); `workloads`: those
    the job controls, with their status; `flavors`: the ResourceFlavors by name."""
    if not queued_here(stored, state.settings):
        return []
    return _Queued(state, stored, workloads, flavors or {}, priority).decide()


def orphaned(workloads: Sequence[Mapping[str, Any]], now: datetime) -> list[Action]:
    """The writes of Workloads whose job is gone, one per Workload per pass as Kueue's
    job reconciler makes them for a job not found: Finished (OwnerNotFound) first, so
    its quota is released even if the garbage collector is slow; then its finalizer
    (kueue.x-k8s.io/resource-in-use) off, so the collector can delete it."""
    actions: list[Action] = []
    for workload in workloads:
        finish = orphan_condition(workload)
        finalizers = (workload.get("metadata") or {}).get("finalizers") or []
        if finish is not None:
            status = dict(workload.get("status") or {})
            status["conditions"] = set_condition(status.get("conditions") or [], finish, now)
            manifest = {**workload, "status": status}
            actions.append(UpdateGroupStatus(kind=WORKLOAD, manifest=manifest))
        elif FINALIZER in finalizers and releases_finalizer(workload, job_exists=False):
            released = copy.deepcopy(dict(workload))
            released["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
            actions.append(UpdateGroup(kind=WORKLOAD, manifest=released))
    return actions


class _Queued:
    def __init__(
        self,
        state: Pass,
        stored: Job,
        workloads: Sequence[OwnedObject],
        flavors: Mapping[str, Mapping[str, Any]],
        priority: Priority | PriorityNotFound | None,
    ) -> None:
        self.state = state
        self.stored = stored
        self.flavors = flavors
        self.priority = priority
        uid = stored.metadata.uid
        self.observed = [w.document for w in workloads]
        self.owned = [w.document for w in workloads if w.metadata.controller_uid() == uid]
        self.suspended = bool(stored.spec.run_policy.suspend)
        # Pods that hold resources: any not yet ended, terminating or not.
        self.active = any(p.status.phase not in ("Succeeded", "Failed") for p in state.pods)
        self.actions: list[Action] = []
        self.written: set[str] = set()  # Workloads written this pass, by name

    def decide(self) -> list[Action]:
        workload, no_match = self._one_workload()
        if workload is not None and is_true(workload, "Finished"):
            self._release(workload)  # and the job stays as it is
        elif workload is not None and _deleting(workload):
            self._hold(Stop("WorkloadDeleted", "Workload is deleted"))
            self._release(workload)
        elif finished(self.stored) is not None:
            if workload is not None:
                self._finish(workload)
        elif workload is None:
            # A job that never had a Workload nor pods is suspended as Kueue's webhook
            # suspends a new job, silently; any other is stopped.
            fresh = not self.owned and not self.active
            self._hold(None if fresh else no_match)
        else:
            self._queued(workload)
        return self.actions

    # -- step 1: one Workload --------------------------------------------------------

    def _one_workload(self) -> tuple[dict[str, Any] | None, Stop | None]:
        """The Workload that describes the job (None: none does), and why a running
        job must stop for want of one; plans the creates, updates and deletes."""
        missing, priority = None, self.priority
        if isinstance(priority, PriorityNotFound):
            missing, priority = priority, None
        prebuilt = prebuilt_workload_name(self.stored)
        if prebuilt is not None:
            return self._prebuilt(prebuilt, priority)
        try:
            sync = sync_workloads(
                self.stored,
                self.owned,
                suspended=self.suspended,
                active=self.active,
                priority=priority,
                flavors=self.flavors,
            )
        except WorkloadError as error:  # a template Kueue cannot read: no Workload
            self.state.event("Warning", "ErrWorkloadCompose", str(error))
            return None, None
        for name in sync.delete:
            self._delete(self._observed(name))
        if missing is not None and (sync.create is not None or sync.update is not None):
            wanted = missing.wanted
            self.state.event(
                "Warning", "ErrWorkloadCompose", f"{_class_kind(wanted)} {wanted.name!r} not found"
            )
            self.state.requeue_at(self.state.now + timedelta(seconds=PRIORITY_RECHECK_SECONDS))
            return sync.match, sync.stop
        if sync.update is not None:
            self._write(UpdateGroup(kind=WORKLOAD, manifest=sync.update))
            if sync.match is None:
                key = self._key(sync.update)
                message = f"Updated not matching Workload for suspended job: {key}"
                self.state.event("Normal", "UpdatedWorkload", message)
            return sync.update, sync.stop
        if sync.create is not None:
            self.actions.append(CreateGroup(kind=WORKLOAD, manifest=sync.create))
            message = f"Created Workload: {self._key(sync.create)}"
            self.state.event("Normal", "CreatedWorkload", message)
        return sync.match, sync.stop

    def _prebuilt(
        self, name: str, priority: Priority | None
    ) -> tuple[dict[str, Any] | None, Stop | None]:
        """The prebuilt Workload `name` (a MultiKueue worker's copy of a job), taken
        and checked (`sync_prebuilt`); none is ever made. Until it exists the job
        waits, looking again on its own: an unowned Workload's creation queues no
        job."""
        found = next((w for w in self.observed if _name(w) == name), None)
        if found is None:
            self.state.requeue_at(self.state.now + timedelta(seconds=PREBUILT_RECHECK_SECONDS))
            running = not self.suspended and finished(self.stored) is None
            return None, Stop("NoMatchingWorkload", "missing workload") if running else None
        try:
            sync = sync_prebuilt(
                self.stored,
                found,
                suspended=self.suspended,
                priority=priority,
                flavors=self.flavors,
            )
        except WorkloadError as error:  # a template Kueue cannot read
            self.state.event("Warning", "ErrWorkloadCompose", str(error))
            return None, None
        if sync.update is not None:
            self._write(UpdateGroup(kind=WORKLOAD, manifest=sync.update))
        if sync.out_of_sync is not None:
            stale = sync.out_of_sync
            status = _with_condition(stale, out_of_sync_condition(stale), self.state)
            if self._write_status(stale, status):
                message = f"Workload '{self._key(stale)}' is declared finished"
                self.state.event("Normal", "FinishedWorkload", message)
        return sync.match, sync.stop

    def _observed(self, name: str) -> dict[str, Any]:
        return next(w for w in self.owned if _name(w) == name)

    def _delete(self, workload: dict[str, Any]) -> None:
        """A Workload that no longer describes the job: its finalizer off, deleted."""
        self._release(workload)
        if not _deleting(workload):
            self.actions.append(DeleteGroup(kind=WORKLOAD, name=_name(workload)))
            message = f"Deleted not matching Workload: {self._key(workload)}"
            self.state.event("Normal", "DeletedWorkload", message)

    # -- steps 2 to 6 ----------------------------------------------------------------

    def _release(self, workload: dict[str, Any]) -> None:
        """Its finalizer off (kueue.x-k8s.io/resource-in-use): it holds no quota, or it
        is going, and is no longer Kueue's to keep."""
        finalizers = (workload.get("metadata") or {}).get("finalizers") or []
        if FINALIZER in finalizers:
            kept = [f for f in finalizers if f != FINALIZER]
            released = copy.deepcopy(workload)
            released["metadata"]["finalizers"] = kept
            self._write(UpdateGroup(kind=WORKLOAD, manifest=released))

    def _finish(self, workload: dict[str, Any]) -> None:
        status = _with_condition(workload, finished_condition(self.stored, workload), self.state)
        if self._write_status(workload, status):
            message = f"Workload '{self._key(workload)}' is declared finished"
            self.state.event("Normal", "FinishedWorkload", message)

    def _queued(self, workload: dict[str, Any]) -> None:
        """A Workload that describes the running or waiting job."""
        status = _with_condition(workload, pods_ready_condition(workload, self.stored), self.state)
        why = stop(workload, running=not self.suspended)
        admitted = admission(workload)
        if why is not None:  # evicted, or running unadmitted
            self._hold(why)
            held = {**workload, "status": status}
            released = quota_release(held, job_active=self.active, now=self.state.now)
            self._write_status(workload, released or status)
        elif admitted is None:  # waiting to be admitted
            self._hold(None)
            self._write_status(workload, status)
        else:
            self._start(workload, admitted, status)

    def _start(self, workload: dict[str, Any], admitted: Admission, status: dict[str, Any]) -> None:
        """Admitted: the job runs with what the admission says (a suspended one is
        started). An admission that names a flavor not yet observed waits; one that
        cannot be applied to the job finishes the Workload (FailedToStart), as Kueue
        gives up on it rather than retry for ever."""
        try:
            specs = self._admitted_specs(pod_set_info(admitted, self.flavors))
        except FlavorNotFound:
            self._cannot_render()
            self.state.requeue_at(self.state.now + timedelta(seconds=FLAVOR_RECHECK_SECONDS))
            self._write_status(workload, status)
            return
        except WorkloadError as error:
            self._cannot_render()
            if self.suspended:
                failed = {**workload, "status": status}
                status = _with_condition(failed, failed_to_start(failed, error), self.state)
                self.state.event("Warning", "FailedToStart", str(error))
            self._write_status(workload, status)
            return
        self._write_status(workload, status)
        state = self.state
        state.job = with_replica_specs(_with_suspend(state.job, False), specs)
        state.replica_specs = specs
        if self.suspended:
            self.actions.insert(0, SetSuspend(value=False))
            state.event("Normal", "Started", f"Admitted by clusterQueue {admitted.cluster_queue}")

    def _admitted_specs(self, infos: Mapping[str, PodSetInfo]) -> dict[str, ReplicaSpec]:
        """The defaulted job's replica specs as admitted: each replica type's podSet
        (its lower-case name) gives its count and what its template gets."""
        out = {}
        for key, spec in self.state.job.spec.replica_specs.items():
            info = infos.get(key.lower())
            if info is None:
                raise WorkloadError(f"the admission has no podSet {key.lower()!r}")
            template = inject(spec.template, info)
            out[key] = msgspec.structs.replace(spec, replicas=info.count, template=template)
        return out

    def _cannot_render(self) -> None:
        """The admission cannot be applied now: a suspended job stays so; a running
        one keeps its pods but gets no new one (it would lack the admission)."""
        if self.suspended:
            self._hold(None)
        else:
            self.state.hold_pods = True

    def _hold(self, why: Stop | None) -> None:
        """The job is suspended this pass; a stored job still running is suspended
        first of all (`why`: Kueue's Stopped event, None for none)."""
        self.state.job = _with_suspend(self.state.job, True)
        if self.suspended:
            return
        self.actions.insert(0, SetSuspend(value=True))
        if why is not None:
            self.state.event("Normal", "Stopped", why.message)

    # -- writes ----------------------------------------------------------------------

    def _write(self, action: UpdateGroup | UpdateGroupStatus) -> bool:
        """Plan a write of an observed Workload unless one is planned already (its
        resourceVersion would be stale)."""
        name = action.name
        if name in self.written:
            return False
        self.written.add(name)
        self.actions.append(action)
        return True

    def _write_status(self, workload: dict[str, Any], status: dict[str, Any]) -> bool:
        if status == (workload.get("status") or {}):
            return False
        manifest = {**workload, "status": status}
        return self._write(UpdateGroupStatus(kind=WORKLOAD, manifest=manifest))

    def _key(self, workload: Mapping[str, Any]) -> str:
        return f"{self.stored.metadata.namespace}/{_name(workload)}"


def _name(workload: Mapping[str, Any]) -> str:
    return str((workload.get("metadata") or {}).get("name", ""))


def _deleting(workload: Mapping[str, Any]) -> bool:
    return bool((workload.get("metadata") or {}).get("deletionTimestamp"))


def _class_kind(wanted: PriorityClass) -> str:
    return "PriorityClass" if wanted.source == POD_PRIORITY_CLASS else "WorkloadPriorityClass"


def _with_condition(
    workload: Mapping[str, Any], condition: Mapping[str, Any] | None, state: Pass
) -> dict[str, Any]:
    """The Workload's status with `condition` set (its time moving only on change)."""
    status = dict(workload.get("status") or {})
    if condition is not None:
        status["conditions"] = set_condition(status.get("conditions") or [], condition, state.now)
    return status


def _with_suspend(job: Job, value: bool) -> Job:
    run_policy = msgspec.structs.replace(job.spec.run_policy, suspend=value)
    spec = msgspec.structs.replace(job.spec, run_policy=run_policy)
    return msgspec.structs.replace(job, spec=spec)
