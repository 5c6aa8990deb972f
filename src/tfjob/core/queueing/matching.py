"""Whether the job's Workloads still describe it, and what to do when they do not.

A job may change while it waits (more Workers, another image, another queue). Its
Workload must follow, or Kueue would reserve quota for a job that no longer exists:
as Kueue v0.19.0's job framework does (jobframework ensureOneWorkload,
FindMatchingWorkloads, EquivalentToWorkload), the first owned Workload that matches
the job is kept and every other one deleted; with none matching, a suspended job's
Workload that holds no quota is rewritten in place, and a running job is stopped.
"Matches": same owner, same time limit, and per podSet the same count, minCount,
containers, init containers and (until admitted) tolerations; labels, node
selectors and the rest of the templates are the admission's to change.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec

from tfjob.api.owners import owner_reference
from tfjob.api.types import Job
from tfjob.core.gang import parse_quantity
from tfjob.core.queueing.lifecycle import Stop, finished
from tfjob.core.queueing.names import (
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    is_label_value,
    max_execution_seconds,
    queue_name,
)
from tfjob.core.queueing.placement import (
    FlavorNotFound,
    inject,
    is_true,
    pod_set_info,
    reservation,
)
from tfjob.core.queueing.workload import (
    Priority,
    WorkloadError,
    pod_sets,
    priority_fields,
    workload_manifest,
)
from tfjob.frameworks.registry import framework_of


class WorkloadSync(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with a job's Workloads this pass (at most one write each)."""

    match: dict[str, Any] | None = None  # the Workload that describes the job
    create: dict[str, Any] | None = None  # none exists: create this one
    update: dict[str, Any] | None = None  # write this (a rewritten or retargeted one)
    # Names of Workloads that no longer describe it (finalizer off, then delete).
    delete: tuple[str, ...] = ()
    stop: Stop | None = None  # the job runs without a matching Workload: suspend it
    # A prebuilt Workload that does not describe the job: finish it (OutOfSync).
    out_of_sync: dict[str, Any] | None = None


def sync_workloads(
    job: Job,
    owned: Sequence[Mapping[str, Any]],
    *,
    suspended: bool,
    active: bool,
    priority: Priority | None,
    flavors: Mapping[str, Mapping[str, Any]] | None = None,
    label_keys_to_copy: Collection[str] = (),
    short_name: bool = False,
) -> WorkloadSync:
    """The pass's decision for a job that names a queue. `owned`: the Workloads
    whose ownerReferences name the job; `suspended`: the job is held; `active`: it
    still has running pods; `priority`: `wanted_priority_class` resolved; `flavors`:
    the ResourceFlavors by name; the last two as for `workload_manifest`. A new
    Workload waits until no pod is active, so the quota is never counted twice,
    and a job that has ended gets none."""
    match = next((w for w in owned if workload_matches(w, job, flavors)), None)
    rest = [w for w in owned if w is not match]
    if match is not None:
        return WorkloadSync(
            match=dict(match),
            update=_retargeted(match, job, suspended, priority),
            delete=_names(rest),
        )
    stop = None if suspended or finished(job) else _no_match_stop(rest)
    if rest and suspended and not is_true(rest[0], "QuotaReserved"):
        rewritten = _rewritten(rest[0], job, priority)
        return WorkloadSync(update=rewritten, delete=_names(rest[1:]), stop=stop)
    if rest:
        return WorkloadSync(delete=_names(rest), stop=stop)
    if active or finished(job):
        return WorkloadSync(stop=stop)
    create = workload_manifest(
        job, priority=priority, label_keys_to_copy=label_keys_to_copy, short_name=short_name
    )
    return WorkloadSync(create=create, stop=stop)


def sync_prebuilt(
    job: Job,
    workload: Mapping[str, Any],
    *,
    suspended: bool,
    priority: Priority | None,
    flavors: Mapping[str, Mapping[str, Any]] | None = None,
) -> WorkloadSync:
    """The pass's decision for a job that names a prebuilt Workload (`workload`, as
    observed; a MultiKueue worker's copy of a job), as Kueue's jobframework decides
    it (ensureOneWorkload): the job never makes nor deletes a Workload, it uses this
    one. Not yet controlled by the job: the job takes it (`update`: the job as its
    controller owner, and the job-uid label, EnsurePrebuiltWorkloadOwnership), since
    then its changes queue the job and it goes with the job. Controlled by another
    object: as if there were none. Not describing the job: `out_of_sync`, to be
    finished (OutOfSync), and the job has no Workload."""
    stop = None if suspended or finished(job) else Stop("NoMatchingWorkload", "missing workload")
    owner = _controller(workload)
    if owner is not None and owner.get("uid") != job.metadata.uid:
        return WorkloadSync(stop=stop)
    adopted = _adopted(workload, job) if owner is None else None
    current = adopted or dict(workload)
    if not workload_matches(current, job, flavors):
        return WorkloadSync(update=adopted, out_of_sync=current, stop=stop)
    update = _retargeted(current, job, suspended, priority) or adopted
    return WorkloadSync(match=current, update=update)


def _adopted(workload: Mapping[str, Any], job: Job) -> dict[str, Any]:
    """The Workload with the job as its controller owner and the job-uid label (when
    the UID can be a label's value), as Kueue takes a prebuilt Workload."""
    meta = dict(workload.get("metadata") or {})
    refs = list(meta.get("ownerReferences") or [])
    meta["ownerReferences"] = [*refs, owner_reference(job, framework_of(job))]
    if is_label_value(job.metadata.uid):
        meta["labels"] = {**(meta.get("labels") or {}), JOB_UID_LABEL: job.metadata.uid}
    return {**workload, "metadata": meta}


def _names(workloads: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(str((w.get("metadata") or {}).get("name", "")) for w in workloads)


def _no_match_stop(rest: Sequence[Mapping[str, Any]]) -> Stop:
    if len(rest) == 1:
        return Stop("NoMatchingWorkload", "No matching Workload")
    return Stop("NoMatchingWorkload", "Missing Workload")


def _rewritten(observed: Mapping[str, Any], job: Job, priority: Priority | None) -> dict[str, Any]:
    """The observed Workload with the job's spec now (keeping spec.active, which
    is the user's or Kueue's to set, not the job's)."""
    spec = dict(workload_manifest(job, priority=priority)["spec"])
    active = (observed.get("spec") or {}).get("active")
    if active is not None:
        spec["active"] = active
    return {**observed, "spec": spec}


def _retargeted(
    observed: Mapping[str, Any], job: Job, suspended: bool, priority: Priority | None
) -> dict[str, Any] | None:
    """The matching Workload with the job's queue (while suspended and not yet
    admitted) and WorkloadPriorityClass (when the label changed), None when
    neither changed."""
    spec = dict(observed.get("spec") or {})
    queue = queue_name(job) or ""
    if suspended and not is_true(observed, "Admitted") and spec.get("queueName", "") != queue:
        spec["queueName"] = queue
    if priority_outdated(observed, job):
        spec = {k: v for k, v in spec.items() if k not in ("priorityClassRef", "priority")}
        spec.update(priority_fields(priority))
    if spec == (observed.get("spec") or {}):
        return None
    return {**observed, "spec": spec}


def priority_outdated(workload: Mapping[str, Any], job: Job) -> bool:
    """Whether the job's WorkloadPriorityClass label no longer names the Workload's
    class: Kueue then takes the priority anew. A Workload whose priority came from
    a pod PriorityClass keeps it (a pod's priority cannot change)."""
    ref = (workload.get("spec") or {}).get("priorityClassRef")
    if ref is not None and ref.get("kind") != "WorkloadPriorityClass":
        return False
    current = ref.get("name", "") if ref is not None else ""
    return bool(job.metadata.labels.get(PRIORITY_CLASS_LABEL, "") != current)


def workload_matches(
    workload: Mapping[str, Any],
    job: Job,
    flavors: Mapping[str, Mapping[str, Any]] | None = None,
) -> bool:
    """Whether the Workload describes the job (jobframework EquivalentToWorkload).

    While quota is reserved the job may also equal the podSets as admitted (the
    admission's tolerations in the templates, a partially admitted podSet's
    admitted count). Unlike Kueue, which writes the admission into the job and so
    stops a running job that equals only the podSets as written, tfjob keeps the
    job as written and applies the admission to its pods: the Workload's own
    podSets match whether the job runs or not."""
    owner = _controller(workload)
    if owner is None or owner.get("name") != job.metadata.name:
        return False
    if owner.get("uid") != job.metadata.uid:
        return False
    spec = workload.get("spec") or {}
    if spec.get("maximumExecutionTimeSeconds") != max_execution_seconds(job):
        return False
    try:
        wanted = pod_sets(job)
    except WorkloadError:
        return False
    tolerations = not is_true(workload, "Admitted")
    running = _running_pod_sets(workload, flavors or {})
    if running is not None and _same_pod_sets(wanted, running, tolerations):
        return True
    return _same_pod_sets(wanted, spec.get("podSets") or [], tolerations)


def _controller(workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = (workload.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def _running_pod_sets(
    workload: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]] | None:
    """The Workload's podSets as its reservation runs them (expectedRunningPodSets),
    None without a reservation or when it cannot be applied."""
    reserved = reservation(workload)
    if reserved is None or not is_true(workload, "QuotaReserved"):
        return None
    try:
        infos = pod_set_info(reserved, flavors)
    except (WorkloadError, FlavorNotFound):
        return None
    spec_sets = (workload.get("spec") or {}).get("podSets") or []
    partial = any(ps.get("count", 1) > ps.get("minCount", ps.get("count", 1)) for ps in spec_sets)
    out = []
    for pod_set in spec_sets:
        info = infos.get(pod_set.get("name", "main"))
        if info is None:
            return None
        try:
            running = {**pod_set, "template": inject(pod_set.get("template") or {}, info)}
        except WorkloadError:
            return None
        if partial and "minCount" in pod_set:
            running["count"] = info.count
        out.append(running)
    return out


def _same_pod_sets(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], tolerations: bool
) -> bool:
    if len(a) != len(b):
        return False
    return all(_same_pod_set(x, y, tolerations) for x, y in zip(a, b, strict=True))


def _same_pod_set(a: Mapping[str, Any], b: Mapping[str, Any], tolerations: bool) -> bool:
    if a.get("count", 1) != b.get("count", 1) or a.get("minCount") != b.get("minCount"):
        return False
    fields = ("initContainers", "containers") + (("tolerations",) if tolerations else ())
    spec_a = (a.get("template") or {}).get("spec") or {}
    spec_b = (b.get("template") or {}).get("spec") or {}
    return all(_semantic(spec_a.get(f)) == _semantic(spec_b.get(f)) for f in fields)


def _semantic(value: Any, key: str = "") -> Any:
    """The value as Kubernetes compares typed objects: an unset field, an empty
    list or map and a zero value are one; quantities compare by amount."""
    if isinstance(value, Mapping):
        if key in ("limits", "requests"):
            return _amounts(value) or None
        pairs = ((k, _semantic(v, k)) for k, v in value.items())
        return {k: v for k, v in pairs if v is not None} or None
    if isinstance(value, list):
        return [_semantic(v) for v in value] or None
    if value is None or value == "" or value is False or (type(value) is int and value == 0):
        return None
    return value


def _amounts(value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, amount in value.items():
        try:
            out[name] = parse_quantity(str(amount))[0]
        except ArithmeticError:
            out[name] = str(amount)
    return out
