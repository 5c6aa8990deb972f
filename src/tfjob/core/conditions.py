"""The job-condition state machine, as pure list transformations.

Upstream's rules, plus one fix: a job never ends both Succeeded and Failed
(Failed is sticky, and so is Succeeded).
"""

from __future__ import annotations

import msgspec

from tfjob.api import constants as c
from tfjob.api.types import JobCondition, JobStatus


def find(status: JobStatus, condition_type: str) -> JobCondition | None:
    for condition in status.conditions:
        if condition.type == condition_type:
            return condition
    return None


def is_true(status: JobStatus, condition_type: str) -> bool:
    condition = find(status, condition_type)
    return condition is not None and condition.status == "True"


def is_finished(status: JobStatus) -> bool:
    return is_true(status, c.SUCCEEDED) or is_true(status, c.FAILED)


def set_condition(
    status: JobStatus, condition_type: str, state: str, reason: str, message: str, now: str
) -> bool:
    """Record a condition the way upstream's UpdateJobConditions does; True if it changed.

    - Nothing changes once the job is finished (Failed is sticky; tfjob makes
      Succeeded sticky too, so a job never ends with both).
    - The same type, status and reason again changes nothing (not even the message).
    - The same type and status with a new reason replaces the entry at the end of the
      list and keeps its lastTransitionTime.
    - Running removes Restarting and vice versa; Succeeded/Failed flip Running to False.
    """
    if is_finished(status):
        return False
    existing = find(status, condition_type)
    if existing is not None and existing.status == state and existing.reason == reason:
        return False
    transition = now
    if existing is not None and existing.status == state:
        transition = existing.last_transition_time or now
    new = JobCondition(
        type=condition_type,
        status=state,
        reason=reason,
        message=message,
        last_update_time=now,
        last_transition_time=transition,
    )
    status.conditions = [*_filter_out(status.conditions, condition_type), new]
    return True


def _filter_out(conditions: list[JobCondition], condition_type: str) -> list[JobCondition]:
    kept = []
    for condition in conditions:
        if condition.type == condition_type:
            continue
        if condition_type == c.RESTARTING and condition.type == c.RUNNING:
            continue
        if condition_type == c.RUNNING and condition.type == c.RESTARTING:
            continue
        if condition_type in (c.SUCCEEDED, c.FAILED) and condition.type == c.RUNNING:
            condition = msgspec.structs.replace(condition, status="False")
        kept.append(condition)
    return kept
