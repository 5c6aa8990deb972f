"""A TrainJob's status, as Trainer v2.3.0's controller derives it.

- No condition while it runs; `jobsStatus` copies the JobSet's replicatedJobsStatus
  (every count written, 0 included).
- The JobSet's Completed / Failed (True) become Complete / Failed with the JobSet's
  reason, message, lastTransitionTime and observedGeneration.
- Suspended=True (reason Suspended, "TrainJob is suspended") while spec.suspend; once
  resumed, Suspended=False (reason Resumed, "TrainJob is resumed").
- tfjob: a running JobSet's first counts, every one 0 (its Jobs made, no pod yet),
  are not written alone: they wait for the JobSet's next change, FIRST_COUNTS_WAIT
  seconds at most (`first_counts_wait`). Every count 0 tells a reader (Kueue's
  TrainJob integration, the SDK, kubectl) what no counts tell; the next counts (its
  pods active) come within a second in a cluster; and writing them was a status
  write for most TrainJobs of a burst (decision 0035). A suspended JobSet's counts
  (its Jobs suspended) are written at once.
- activeDeadlineSeconds counts from creation, or from the last resume: past it,
  Failed=True, reason DeadlineExceeded, and the JobSet is deleted. That Failed stays;
  every other Failed is derived again each pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec

from tfjob.api import trainjob as tj
from tfjob.api.timestamps import parse_rfc3339, rfc3339
from tfjob.api.trainjob import JobStatus, TrainJob, TrainJobStatus
from tfjob.core.trainjob.conditions import set_condition

SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_MESSAGE = "TrainJob exceeded its active deadline"

# JobSet condition types -> the TrainJob's.
_TERMINAL = (("Completed", tj.COMPLETE), ("Failed", tj.FAILED))


def finished(status: TrainJobStatus) -> bool:
    return status.is_true(tj.COMPLETE) or status.is_true(tj.FAILED)


def with_suspended(status: TrainJobStatus, suspend: bool, now: datetime) -> TrainJobStatus:
    """Suspended=True while suspended; False (Resumed) once a suspended job resumes."""
    if suspend:
        args = ("True", tj.REASON_SUSPENDED, SUSPENDED_MESSAGE)
    elif status.is_true(tj.SUSPENDED):
        args = ("False", tj.REASON_RESUMED, RESUMED_MESSAGE)
    else:
        return status
    conditions = set_condition(status.conditions, tj.SUSPENDED, *args, rfc3339(now))
    return _replace(status, conditions=conditions)


def with_failed(status: TrainJobStatus, reason: str, message: str, now: datetime) -> TrainJobStatus:
    conditions = set_condition(status.conditions, tj.FAILED, "True", reason, message, rfc3339(now))
    return _replace(status, conditions=conditions)


def from_jobset(status: TrainJobStatus, jobset: dict[str, Any], now: datetime) -> TrainJobStatus:
    """The JobSet's terminal condition and its replicated jobs' counts."""
    observed = jobset.get("status") or {}
    conditions = status.conditions
    for jobset_type, our_type in _TERMINAL:
        cond = next(
            (c for c in observed.get("conditions") or [] if c.get("type") == jobset_type), None
        )
        if cond is None or cond.get("status") != "True":
            continue
        conditions = set_condition(
            conditions,
            our_type,
            "True",
            str(cond.get("reason", "")),
            str(cond.get("message", "")),
            rfc3339(now),
            transition=cond.get("lastTransitionTime") or None,
            observed_generation=cond.get("observedGeneration") or None,
        )
    jobs = [
        JobStatus(
            name=str(job.get("name", "")),
            ready=int(job.get("ready", 0)),
            succeeded=int(job.get("succeeded", 0)),
            failed=int(job.get("failed", 0)),
            active=int(job.get("active", 0)),
            suspended=int(job.get("suspended", 0)),
        )
        for job in observed.get("replicatedJobsStatus") or []
    ]
    return _replace(status, conditions=conditions, jobs_status=jobs)


#: The longest a TrainJob's status waits with the JobSet's first, all-0 counts.
FIRST_COUNTS_WAIT = 300.0


def first_counts_wait(
    old: TrainJobStatus, new: TrainJobStatus, jobset: dict[str, Any], now: datetime
) -> float | None:
    """Seconds to wait before writing `new`, when all it changes from `old` is the
    running JobSet's first counts, every one 0, and the JobSet is younger than
    FIRST_COUNTS_WAIT; else None (write it now)."""
    if old.jobs_status or not new.jobs_status or (jobset.get("spec") or {}).get("suspend"):
        return None
    if any(j.ready or j.succeeded or j.failed or j.active or j.suspended for j in new.jobs_status):
        return None
    if _replace(new, jobs_status=[]) != old:
        return None
    created = (jobset.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return None
    left = (parse_rfc3339(created) + timedelta(seconds=FIRST_COUNTS_WAIT) - now).total_seconds()
    return left if left > 0 else None


def deadline(trainjob: TrainJob, status: TrainJobStatus) -> datetime | None:
    """When the active deadline passes; None without one, finished or suspended."""
    seconds = trainjob.spec.active_deadline_seconds
    if not seconds or finished(status) or trainjob.spec.suspended:
        return None
    start = trainjob.metadata.creation_timestamp
    resumed = status.condition(tj.SUSPENDED)
    if resumed is not None and resumed.status == "False":
        start = resumed.last_transition_time
    if not start:
        return None
    return parse_rfc3339(start) + timedelta(seconds=seconds)


def _replace(status: TrainJobStatus, **changes: Any) -> TrainJobStatus:
    return msgspec.structs.replace(status, **changes)
