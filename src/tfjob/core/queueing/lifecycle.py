"""The Workload's life beside its job's: when the job must stop, and what the job's
state tells Kueue (Finished, PodsReady, the quota an evicted job gives back).

Kueue's scheduler only reads these conditions; keeping them is the job framework's
part, so with an external framework it is tfjob's. Each function says what Kueue
v0.19.0's job reconciler (jobframework reconciler.go) would decide or write; the
conditions come without lastTransitionTime, which `set_condition` adds as Kubernetes
does (only when the status changes), from a time the runtime passes in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple

from tfjob.api import constants as c
from tfjob.api.timestamps import parse_rfc3339, rfc3339
from tfjob.api.types import Job
from tfjob.core.queueing.placement import condition, is_true

#: Kueue cuts a condition's message to 32 KiB, ending it in " ...".
_MAX_MESSAGE: Final = 32 * 1024
_NOT_READY: Final = "Not all pods are ready or succeeded"
_RECOVERING: Final = "At least one pod has failed, waiting for recovery"
_READY: Final = "All pods reached readiness and the workload is running"
_OUT_OF_SYNC: Final = "The prebuilt workload is out of sync with its user job"
#: The evictions after which Kueue requeues the Workload at once (Requeued=True).
_REQUEUED_AT_ONCE: Final = ("Preempted", "NodeFailures")


class Stop(NamedTuple):
    """Why the job must be suspended (Kueue's StopReason) and the event's message."""

    reason: str
    message: str


def stop(workload: Mapping[str, Any] | None, *, running: bool) -> Stop | None:
    """Whether the job must be suspended now, in the order Kueue checks: its
    Workload is being deleted; it is evicted (preempted, deactivated, a check
    failed...: its Evicted condition's message); or it runs (`running`: not
    suspended) without an admission, or without a Workload at all. A job already
    suspended needs no write (Kueue records its Stopped event only on a change)."""
    if workload is None:
        return Stop("NoMatchingWorkload", "Missing Workload") if running else None
    if _deleting(workload):
        return Stop("WorkloadDeleted", "Workload is deleted")
    reason = evicted(workload)
    if reason is not None:
        return Stop("WorkloadEvicted", reason[1])
    if running and not is_true(workload, "Admitted"):
        return Stop("NotAdmitted", "Not admitted by cluster queue")
    return None


def evicted(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the Workload's Evicted condition while it is true:
    Preempted, PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped,
    Deactivated..., all meaning the job's pods must go."""
    found = condition(workload, "Evicted")
    if found is None or found.get("status") != "True":
        return None
    return str(found.get("reason", "")), str(found.get("message", ""))


def finished(job: Job) -> tuple[bool, str] | None:
    """(succeeded, message) once the job has ended: its first Succeeded or Failed
    condition that is true (kubeflowjob Finished)."""
    for cond in job.status.conditions:
        if cond.type in (c.SUCCEEDED, c.FAILED) and cond.status == "True":
            return cond.type == c.SUCCEEDED, cond.message
    return None


def finished_condition(job: Job, workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Finished condition to write once the job has ended (reason Succeeded or
    Failed, the job's condition message), None while it runs or when the Workload
    is already finished. Finished releases the job's quota for good."""
    ended = finished(job)
    if ended is None or is_true(workload, "Finished"):
        return None
    succeeded, message = ended
    return _condition(workload, "Finished", "True", "Succeeded" if succeeded else "Failed", message)


def failed_to_start(workload: Mapping[str, Any], error: Exception) -> dict[str, Any]:
    """The Finished condition of an admitted Workload whose admission cannot be
    applied to the job (a conflicting WorkloadError from `inject`): Kueue gives
    up on it (reason FailedToStart) rather than retry for ever."""
    return _condition(workload, "Finished", "True", "FailedToStart", str(error))


def out_of_sync_condition(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Finished condition of a prebuilt Workload that does not describe its job
    (reason OutOfSync, jobframework ensurePrebuiltWorkloadInSync), None when it is
    already finished. A MultiKueue manager reads a worker's OutOfSync finish as a
    failed dispatch and dispatches the job again, rather than finishing it."""
    if is_true(workload, "Finished"):
        return None
    return _condition(workload, "Finished", "True", "OutOfSync", _OUT_OF_SYNC)


def orphan_condition(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Finished condition of a Workload whose job is gone (reason
    OwnerNotFound), so its quota is released even if the garbage collector is
    slow; None when it is already finished or being deleted."""
    if _deleting(workload) or is_true(workload, "Finished"):
        return None
    return _condition(
        workload, "Finished", "True", "OwnerNotFound", "The workload's owner no longer exists"
    )


def releases_finalizer(workload: Mapping[str, Any], *, job_exists: bool) -> bool:
    """Whether the Workload's finalizer (kueue.x-k8s.io/resource-in-use, which
    keeps it while it holds quota) may be removed now: it is finished, being
    deleted (once its job is stopped), or its job is gone (once finished). A
    Workload to delete loses it first, as Kueue deletes one."""
    return not job_exists or _deleting(workload) or is_true(workload, "Finished")


def _deleting(workload: Mapping[str, Any]) -> bool:
    return bool((workload.get("metadata") or {}).get("deletionTimestamp"))


def pods_ready_condition(workload: Mapping[str, Any], job: Job) -> dict[str, Any] | None:
    """The PodsReady condition when it must change, else None (only kept when Kueue
    runs with waitForPodsReady). A kubeflow job's pods are ready while its Running
    condition is true (kubeflowjob PodsReady). Not ready: WaitForStart until it
    first was, then WaitForRecovery; ready again after that: Recovered."""
    wanted = _pods_ready(workload, _running(job))
    current = condition(workload, "PodsReady")
    if current is not None and all(current.get(k) == wanted[k] for k in ("status", "reason")):
        return None
    return wanted


def _running(job: Job) -> bool:
    return any(cond.type == c.RUNNING and cond.status == "True" for cond in job.status.conditions)


def _pods_ready(workload: Mapping[str, Any], ready: bool) -> dict[str, Any]:
    current = condition(workload, "PodsReady") or {}
    reason = current.get("reason")
    if not is_true(workload, "Admitted"):
        return _condition(workload, "PodsReady", "False", "WaitForStart", _NOT_READY)
    if ready:
        again = reason in ("WaitForRecovery", "Recovered")
        return _condition(
            workload, "PodsReady", "True", "Recovered" if again else "Started", _READY
        )
    if current.get("status") == "True" or reason == "WaitForRecovery":
        return _condition(workload, "PodsReady", "False", "WaitForRecovery", _RECOVERING)
    return _condition(workload, "PodsReady", "False", "WaitForStart", _NOT_READY)


def quota_release(
    workload: Mapping[str, Any], *, job_active: bool, now: datetime
) -> dict[str, Any] | None:
    """The Workload's status once an evicted job has no active pod left, None
    before (or with nothing to release): the quota reservation and admission go,
    Requeued says whether Kueue queues it again at once (after a preemption or a
    node failure) and Admitted turns false, so another job may take the room."""
    reason = evicted(workload)
    if reason is None or job_active or not is_true(workload, "QuotaReserved"):
        return None
    status = dict(workload.get("status") or {})
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    requeued = "True" if reason[0] in _REQUEUED_AT_ONCE else "False"
    conditions = set_condition(conditions, _condition(workload, "Requeued", requeued, *reason), now)
    held = _condition(workload, "QuotaReserved", "False", "Pending", reason[1])
    conditions = set_condition(conditions, held, now)
    status.pop("admission", None)
    status["conditions"] = conditions
    _unadmit(workload, status, now)
    return status


def _unadmit(workload: Mapping[str, Any], status: dict[str, Any], now: datetime) -> None:
    """Admitted turns false without a reservation (workload SyncAdmittedCondition),
    and the time it was admitted adds to accumulatedPastExecutionTimeSeconds."""
    conditions = status["conditions"]
    admitted = next((x for x in conditions if x.get("type") == "Admitted"), None)
    if admitted is None or admitted.get("status") != "True":
        return
    checks = status.get("admissionChecks") or []
    if all(check.get("state") == "Ready" for check in checks):
        why = ("NoReservation", "The workload has no reservation")
    else:
        why = (
            "NoReservationUnsatisfiedChecks",
            "The workload has no reservation and not all checks ready",
        )
    since = admitted.get("lastTransitionTime")
    if since:
        seconds = int((now - parse_rfc3339(since)).total_seconds())
        status["accumulatedPastExecutionTimeSeconds"] = (
            status.get("accumulatedPastExecutionTimeSeconds") or 0
        ) + seconds
    status["conditions"] = set_condition(
        conditions, _condition(workload, "Admitted", "False", *why), now
    )


def _condition(
    workload: Mapping[str, Any], kind: str, status: str, reason: str, message: str
) -> dict[str, Any]:
    raw = message.encode()
    if len(raw) > _MAX_MESSAGE:
        message = raw[: _MAX_MESSAGE - 4].decode(errors="ignore") + " ..."
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": (workload.get("metadata") or {}).get("generation", 0),
    }


def set_condition(
    conditions: Sequence[Mapping[str, Any]], new: Mapping[str, Any], now: datetime
) -> list[dict[str, Any]]:
    """The conditions with `new` set: added, or the one of its type updated, its
    lastTransitionTime moving to `now` only when its status changes (as
    apimachinery's SetStatusCondition)."""
    out = [dict(x) for x in conditions]
    found = next((x for x in out if x.get("type") == new["type"]), None)
    if found is None:
        out.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or rfc3339(now)})
        return out
    if found.get("status") != new["status"]:
        found["lastTransitionTime"] = new.get("lastTransitionTime") or rfc3339(now)
    found.update({k: v for k, v in new.items() if k != "lastTransitionTime"})
    return out
