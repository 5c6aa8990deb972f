"""One reconcile of one job, of any kind: observed state in, plan out. Pure.

The order follows upstream's ReconcileJobs: finished jobs are only cleaned up,
suspended jobs are emptied, failure limits are checked, then each replica type's pods
and services are reconciled, and finally the job's conditions are derived from the
replica counts. What differs by kind comes from the job's framework (`state.framework`:
its names, reasons, env, success rule); the rest is shared. The fixes tfjob makes over
upstream are marked "(better)".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import msgspec

from tfjob.api import constants as c
from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.api.timestamps import parse_rfc3339
from tfjob.api.types import Job, ReplicaStatus
from tfjob.core import conditions, gang, owned, queued
from tfjob.core import pods as podlib
from tfjob.core.cleanup import cleanup_actions, suspend_actions
from tfjob.core.objects import creation_events, desired_service, replica_selector
from tfjob.core.pass_state import Pass
from tfjob.core.plan import (
    CreateGroup,
    CreateOwned,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeletePod,
    DeleteService,
    Plan,
    UpdateGroup,
    UpdateOwned,
)
from tfjob.core.queued import PriorityNotFound
from tfjob.core.queueing import Priority
from tfjob.core.settings import Settings
from tfjob.core.status import update_job_status
from tfjob.frameworks.registry import framework_of

_Obj = TypeVar("_Obj", Pod, Service, OwnedObject)

#: While Volcano has not admitted a job's PodGroup, look again this often (seconds).
GROUP_RECHECK_SECONDS = 1.0


def reconcile(
    job: Job,
    pods: Sequence[Pod],
    services: Sequence[Service],
    now: datetime,
    settings: Settings,
    groups: Sequence[dict[str, Any]] = (),
    owned_objects: Sequence[OwnedObject] = (),
    *,
    workloads: Sequence[OwnedObject] = (),
    flavors: Mapping[str, Mapping[str, Any]] | None = None,
    priority: Priority | PriorityNotFound | None = None,
) -> Plan:
    """Decide what to do for `job` given the pods and services that exist now.

    `job` is the stored object (not defaulted: the core defaults its own copy).
    `pods`/`services` are those labelled for this job; any whose controller owner is
    not this job is ignored, so orphans are never adopted. `now` is timezone-aware UTC.
    `groups` are the job's gang-scheduling group objects that exist (as read from the
    API), when gang scheduling is on (`settings.gang_scheduler_name`).
    `owned_objects` are the other objects labelled for this job, of the kinds its kind
    owns (`KindDeclaration.owned_kinds`; core/owned.py), like `pods` filtered by owner.
    With `settings.kueue_integration` "external", for a job that names a LocalQueue
    (core/queued.py): `workloads` are its Kueue Workloads (kueue.x-k8s.io, with their
    status), filtered by owner the same way; `flavors` the ResourceFlavors by name;
    `priority` the class `queued.priority_to_resolve` named, as resolved. Otherwise
    they are not read. A job whose `spec.managedBy` is kueue.x-k8s.io/multikueue in
    that mode gets only its queued pass (`queued.dispatched`); with any other
    controller named there, or in `runPolicy.managedBy`, nothing at all.
    """
    if _managed_elsewhere(job, settings):
        return Plan(status=job.status)
    framework = framework_of(job)
    errors = framework.validate(job, require_image=settings.require_image)
    if errors:
        return reject(job, now, "; ".join(str(e) for e in errors))
    state = Pass.start(
        framework.with_defaults(job), _owned(job, pods), _owned(job, services), now, settings
    )
    state.groups = list(groups)
    state.owned = _owned(job, owned_objects)
    # A queued job's Workload writes and suspend come first; `state.job` is then the
    # job as Kueue would have it (suspended, or running as admitted).
    queue_actions = queued.begin(state, job, workloads, flavors, priority)
    if queued.dispatched(job, settings):
        # A MultiKueue job on the manager: its Workload and suspend are all there is
        # to do here; it runs on a worker, whose status Kueue copies onto it.
        return Plan(
            actions=queue_actions,
            events=state.events,
            status=job.status,
            requeue_after=state.requeue_after,
        )
    _ensure_created(state)
    if conditions.is_finished(state.status):
        _finish(state)
    elif state.job.spec.run_policy.suspend:
        _suspend(state)
    else:
        _run(state)
    state.actions[:0] = queue_actions
    return state.plan(original=job.status)


def _managed_elsewhere(job: Job, settings: Settings) -> bool:
    """Whether another controller reconciles the job, so it is left alone entirely
    (no write, no event): `runPolicy.managedBy` names another (Kueue's MultiKueue
    in builtin mode, whose webhook sets it), or so does tfjob's `spec.managedBy`,
    unless it hands the job to MultiKueue with tfjob keeping its Workload
    (`queued.dispatched`: external mode, a queue named). Unset, empty or this
    operator's name: ours."""
    managed_by = job.spec.run_policy.managed_by
    if managed_by is not None and managed_by != c.MANAGED_BY_OPERATOR:
        return True
    spec_managed_by = job.spec.managed_by or c.MANAGED_BY_OPERATOR
    if spec_managed_by == c.MANAGED_BY_OPERATOR:
        return False
    return not queued.dispatched(job, settings)


def _owned(job: Job, objects: Sequence[_Obj]) -> list[_Obj]:
    return [o for o in objects if o.metadata.controller_uid() == job.metadata.uid]


def reject(job: Job, now: datetime, problems: str) -> Plan:
    """The plan for a job that cannot run: a Failed condition naming the problems.

    Used for jobs that fail validation, and by runtimes for stored objects that do not
    even decode (give it a job of the kind's model with just their metadata and
    status). A job that is already finished is left as it is.
    """
    state = Pass.start(job, [], [], now, Settings())
    kind = state.kind
    _ensure_created(state)
    if not conditions.is_finished(state.status):
        state.event(
            "Warning",
            state.framework.reason("FailedValidation"),
            f"{kind} failed validation because {problems}",
        )
        state.fail(f"Invalid{kind}Spec", f"{kind} {state.qualified_name} is invalid: {problems}")
    return state.plan(original=job.status)


def _ensure_created(state: Pass) -> None:
    if conditions.find(state.status, c.CREATED) is None:
        state.condition(
            c.CREATED,
            "True",
            state.framework.reason("Created"),
            f"{state.kind} {state.name} is created.",
        )


def _finish(state: Pass) -> None:
    """A finished job: clean up by policy, fold active into succeeded, enforce the TTL."""
    state.actions += cleanup_actions(state)
    _delete_groups(state)
    if conditions.is_true(state.status, c.SUCCEEDED):
        state.status.replica_statuses = {
            rtype: msgspec.structs.replace(rs, succeeded=rs.succeeded + rs.active, active=0)
            for rtype, rs in state.status.replica_statuses.items()
        }
    _enforce_ttl(state)


def _enforce_ttl(state: Pass) -> None:
    ttl = state.job.spec.run_policy.ttl_seconds_after_finished
    if ttl is None or state.job.spec.run_policy.suspend:
        return
    if state.status.completion_time is None:
        state.status.completion_time = state.stamp
    expires = parse_rfc3339(state.status.completion_time) + timedelta(seconds=ttl)
    if state.now >= expires:
        state.delete_job()
    else:
        state.requeue_at(expires)


def _suspend(state: Pass) -> None:
    """Suspended: no pods, no services, Running=False, Suspended=True."""
    state.actions += suspend_actions(state)
    state.actions += owned.suspend_actions(state)
    _delete_groups(state)
    state.status.replica_statuses = {
        rtype: msgspec.structs.replace(rs, active=0)
        for rtype, rs in state.status.replica_statuses.items()
    }
    message = f"{state.kind} {state.name} is suspended."
    reason = state.framework.reason("Suspended")
    if conditions.is_true(state.status, c.RUNNING):
        state.condition(c.RUNNING, "False", reason, message)
    if not conditions.is_true(state.status, c.SUSPENDED):
        state.condition(c.SUSPENDED, "True", reason, message)
        state.event("Normal", reason, message)


def _run(state: Pass) -> None:
    if conditions.is_true(state.status, c.SUSPENDED):
        message = f"{state.kind} {state.name} is resumed."
        reason = state.framework.reason("Resumed")
        state.condition(c.SUSPENDED, "False", reason, message)
        state.event("Normal", reason, message)
        state.status.start_time = state.start_stamp
    _forget_gone_pods(state)
    if _past_limits(state):
        _finish(state)
        return
    _sync_groups(state)
    state.actions += owned.sync_actions(state)
    for rtype in sorted(state.job.spec.replica_specs):
        _reconcile_pods(state, rtype)
        if state.framework.services:
            _reconcile_services(state, rtype)
    if state.status.start_time is None:
        state.status.start_time = state.start_stamp
    update_job_status(state)
    if conditions.is_finished(state.status):
        # (better) Do not create what the finished job no longer needs; clean up now.
        state.actions = [
            a
            for a in state.actions
            if not isinstance(
                a, CreatePod | CreateService | CreateGroup | UpdateGroup | CreateOwned | UpdateOwned
            )
        ]
        _finish(state)
    else:
        _arm_deadline(state)


def _forget_gone_pods(state: Pass) -> None:
    """Drop the counted UIDs of pods that no longer exist: their failure is in
    `restartCount` for good, and a recreated pod has a new UID."""
    present = {pod.metadata.uid for pod in state.pods}
    counted = [uid for uid in state.status.counted_pods if uid in present]
    if counted != state.status.counted_pods:
        state.status.counted_pods = counted


def _past_limits(state: Pass) -> bool:
    """backoffLimit and activeDeadlineSeconds; fails the job if either is exceeded.

    (better) The Failed condition is set before cleanup, so cleanPodPolicy is honoured
    (#3419), and the deadline is enforced by a timed requeue, not by luck (#3358).
    """
    policy = state.job.spec.run_policy
    if policy.backoff_limit is not None and _failures(state) >= max(policy.backoff_limit, 1):
        message = f"Job {state.name} has failed because it has reached the specified backoff limit"
    elif policy.active_deadline_seconds is not None and _past_deadline(state):
        message = (
            f"Job {state.name} has failed because it was active longer than specified deadline"
        )
    else:
        return False
    reason = state.framework.reason("Failed")
    state.event("Normal", reason, message)
    state.fail(reason, message)
    return True


def _failures(state: Pass) -> int:
    """(better) Every replica failure so far: the pods the operator recreated (kept in
    status, so it survives operator restarts), in-place restarts of live pods, and the
    failed pods that now need a restart. The job fails at the backoffLimit-th failure
    (upstream's in-place rule, extended to recreated pods, #2342, #1589)."""
    total = state.status.restart_count
    for pod in state.pods:
        policy = state.restart_policy_of(pod)
        if policy is None or policy == "Never" or podlib.is_terminating(pod):
            continue
        if _counted(state, pod):
            continue  # its failure (and in-place restarts) are in restart_count already
        total += podlib.restart_count(pod)
        if pod.status.phase == "Failed" and podlib.restarts_pod(policy, state.exit_code(pod)):
            total += 1
    return total


def _past_deadline(state: Pass) -> bool:
    deadline = state.deadline()
    return deadline is not None and state.now >= deadline


def _arm_deadline(state: Pass) -> None:
    deadline = state.deadline()
    if deadline is not None:
        state.requeue_at(deadline)


def _reconcile_pods(state: Pass, rtype: str) -> None:
    """Create missing pods, restart failed ones by their restart policy, count them."""
    spec = state.job.spec.replica_specs[rtype]
    replicas = spec.replicas or 0
    counts = ReplicaStatus()
    framework = state.framework
    if not framework.reconciles_replicas(state.job, rtype, state.pods):
        state.status.replica_statuses[rtype] = counts
        return
    typed = podlib.pods_of_type(state.pods, rtype)
    for index, group in enumerate(podlib.slots(typed, replicas, framework.indexed(rtype))):
        if not group and index < replicas and not state.hold_pods:
            state.actions.append(
                CreatePod(
                    replica_type=rtype,
                    index=index,
                    name=state.framework.pod_name(state.job.metadata.name, rtype, index),
                )
            )
            state.events += creation_events(state.job, rtype)
            warning = gang.scheduler_warning(state.job, state.settings.gang_scheduler_name)
            if warning is not None:
                state.events.append(warning)
        elif len(group) == 1:
            _reconcile_pod(state, rtype, index, group[0], counts)
    if state.framework.status_selector:
        name, controller = state.job.metadata.name, state.framework.controller_name
        counts.selector = replica_selector(name, rtype, controller)
    state.status.replica_statuses[rtype] = counts


def _reconcile_pod(state: Pass, rtype: str, index: int, pod: Pod, counts: ReplicaStatus) -> None:
    spec = state.job.spec.replica_specs[rtype]
    terminating = podlib.is_terminating(pod)
    if index >= (spec.replicas or 0) and not terminating:
        state.actions.append(_delete(rtype, pod))
    code = state.exit_code(pod)
    if code != c.EXIT_CODE_UNKNOWN:
        message = f"Pod: {pod.metadata.namespace}.{pod.metadata.name} exited with code {code}"
        state.event("Normal", "ExitedWithCode", message)
    if pod.status.phase == "Failed" and not terminating:
        _handle_failed_pod(state, rtype, pod, code)
    podlib.count_pod(counts, pod, forgive_termination=spec.restart_policy != "Never")


def _delete(rtype: str, pod: Pod) -> DeletePod:
    return DeletePod(replica_type=rtype, name=pod.metadata.name, uid=pod.metadata.uid)


def _handle_failed_pod(state: Pass, rtype: str, pod: Pod, code: int) -> None:
    policy = state.job.spec.replica_specs[rtype].restart_policy
    if podlib.restarts_pod(policy, code):
        state.actions.append(_delete(rtype, pod))
        if _counted(state, pod):
            return  # counted when first seen; only the delete is retried
        state.status.restart_count += 1 + podlib.restart_count(pod)
        state.status.counted_pods = [*state.status.counted_pods, pod.metadata.uid]
        state.status_first = True
        message = f"job {state.job.metadata.name} is restarting because {rtype} replica(s) failed."
        reason = state.framework.reason("Restarting")
        state.event("Warning", reason, message)
        state.condition(c.RESTARTING, "True", reason, message)
    elif policy == "ExitCode":
        message = (
            f'job "{state.job.metadata.name}" is failing because "{rtype}" replica(s) failed. '
            f"{state.describe_exit(pod)}."
        )
        reason = state.framework.reason("Failed")
        if state.fail(reason, message):
            state.event("Warning", reason, message)


def _counted(state: Pass, pod: Pod) -> bool:
    """Whether this pod's failure is already in `restartCount` (count-once rule: a
    failure is recorded with its pod's UID in the same status write that counts it)."""
    return bool(pod.metadata.uid) and pod.metadata.uid in state.status.counted_pods


def _reconcile_services(state: Pass, rtype: str) -> None:
    """One headless service per index; create the missing, delete the surplus."""
    replicas = state.job.spec.replica_specs[rtype].replicas or 0
    present: dict[int, str] = {}
    for service in state.services:
        labels = service.metadata.labels
        raw = labels.get(c.LABEL_REPLICA_INDEX, "")
        if labels.get(c.LABEL_REPLICA_TYPE) == rtype.lower() and raw.isdigit():
            present[int(raw)] = service.metadata.name
    for index in range(replicas):
        if index not in present:
            manifest = desired_service(state.job, rtype, index)
            state.actions.append(CreateService(replica_type=rtype, index=index, manifest=manifest))
    for index, name in sorted(present.items()):
        if index >= replicas:
            state.actions.append(DeleteService(replica_type=rtype, name=name))


def _observed_group(state: Pass, api_version: str, kind: str) -> dict[str, Any] | None:
    for group in state.groups:
        if group.get("apiVersion") == api_version and group.get("kind") == kind:
            return group
    return None


def _sync_groups(state: Pass) -> None:
    """Gang scheduling: create the job's missing group objects before its pods, and
    update a PodGroup whose spec no longer matches the job (it was scaled, or its
    minAvailable or minResources changed); with Volcano, create no pod until Volcano
    has admitted the group (its PodGroup left Pending)."""
    scheduler = state.settings.gang_scheduler_name
    for manifest in gang.group_objects(state.job, scheduler):
        kind = next(k for k in gang.group_kinds(scheduler) if k.kind == manifest["kind"])
        observed = _observed_group(state, kind.api_version, kind.kind)
        if observed is None:
            state.actions.append(CreateGroup(kind=kind, manifest=manifest))
        elif (updated := gang.updated_group(kind, observed, manifest)) is not None:
            state.actions.append(UpdateGroup(kind=kind, manifest=updated))
        if gang.holds_pods(scheduler) and (observed is None or not gang.admitted(observed)):
            state.hold_pods = True
            state.requeue_at(state.now + timedelta(seconds=GROUP_RECHECK_SECONDS))


def _delete_groups(state: Pass) -> None:
    """A finished or suspended job gives its group objects back, newest first."""
    for kind in reversed(gang.group_kinds(state.settings.gang_scheduler_name)):
        observed = _observed_group(state, kind.api_version, kind.kind)
        # Not again while it goes (a native PodGroup waits on its finalizer).
        if observed is not None and not (observed.get("metadata") or {}).get("deletionTimestamp"):
            state.actions.append(DeleteGroup(kind=kind, name=state.job.metadata.name))
