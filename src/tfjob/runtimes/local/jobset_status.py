"""The Job and JobSet controllers' verdicts, locally: from the pods, each Job's state
and the JobSet's status, which the TrainJob core reads as it reads a cluster's.

A Job (Kubernetes' rules for an Indexed Job whose parallelism is its completions):
- succeeds when each index has a Succeeded pod;
- fails, with restartPolicy OnFailure (JobSet's default) or Always, when its pods'
  restarts in place reach `backoffLimit` (any restart when it is 0); with Never, when
  more than `backoffLimit` pods failed (the runtime replaces a failed pod within the
  limit, as the Job controller does).

The JobSet (v0.12.0): Completed (reason `AllJobsCompleted`) when its success policy is
met (`All`, the default: every Job of the target replicated jobs, or of all; `Any`:
one of them); Failed (reason `FailedJobs`) as soon as a Job fails, as with its
default failure policy (no restarts; `failurePolicy.maxRestarts` is not applied
locally). `replicatedJobsStatus` counts each replicated job's Jobs as JobSet does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfjob.runtimes.local.jobset_pods import JobSlot

COMPLETED_MESSAGE = "jobset completed successfully"
FAILED_MESSAGE = "jobset failed due to one or more job failures"


@dataclass(frozen=True)
class PodState:
    """What the Job controller reads of one pod: its Job, index, phase and restarts."""

    job: str
    index: int
    phase: str
    restarts: int


@dataclass(frozen=True)
class JobState:
    slot: JobSlot
    succeeded: int  # indexes with a Succeeded pod
    failed: int  # pods failed (Never), or restarts in place (OnFailure, Always)
    active: int  # pods Pending or Running
    ready: int  # pods Running

    @property
    def complete(self) -> bool:
        return self.succeeded >= self.slot.completions

    @property
    def failed_for_good(self) -> bool:
        limit = self.slot.backoff_limit
        if self.complete:
            return False
        if self.slot.restart_policy == "Never":
            return self.failed > limit
        return self.failed > 0 if limit == 0 else self.failed >= limit


def job_states(jobs: list[JobSlot], pods: list[PodState]) -> list[JobState]:
    states = []
    for job in jobs:
        own = [p for p in pods if p.job == job.name]
        done = {p.index for p in own if p.phase == "Succeeded"}
        live = [p for p in own if p.phase in ("Pending", "Running")]
        if job.restart_policy == "Never":
            failed = sum(1 for p in own if p.phase == "Failed")
        else:
            failed = sum(p.restarts for p in live)
        states.append(
            JobState(
                slot=job,
                succeeded=len(done),
                failed=failed,
                active=len(live),
                ready=sum(1 for p in live if p.phase == "Running"),
            )
        )
    return states


def jobset_status(
    spec: Mapping[str, Any], states: list[JobState], now: str
) -> tuple[dict[str, Any], str | None]:
    """The JobSet's status and its terminal condition's type (None while it runs)."""
    status: dict[str, Any] = {"replicatedJobsStatus": _counts(spec, states)}
    failed = next((s for s in states if s.failed_for_good), None)
    if failed is not None:
        message = f"{FAILED_MESSAGE} (first failed job: {failed.slot.name})"
        status["conditions"] = [_condition("Failed", "FailedJobs", message, now)]
        return status, "Failed"
    if _success_met(spec, states):
        status["conditions"] = [_condition("Completed", "AllJobsCompleted", COMPLETED_MESSAGE, now)]
        return status, "Completed"
    return status, None


def _success_met(spec: Mapping[str, Any], states: list[JobState]) -> bool:
    policy = spec.get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or [])
    chosen = [s for s in states if not targets or s.slot.replicated_job in targets]
    if not chosen:
        return False
    if policy.get("operator") == "Any":
        return any(s.complete for s in chosen)
    return all(s.complete for s in chosen)


def _counts(spec: Mapping[str, Any], states: list[JobState]) -> list[dict[str, Any]]:
    counts = []
    for rjob in spec.get("replicatedJobs") or []:
        own = [s for s in states if s.slot.replicated_job == rjob["name"]]
        running = [s for s in own if not s.complete and not s.failed_for_good]
        counts.append(
            {
                "name": rjob["name"],
                "ready": sum(1 for s in running if s.ready >= s.slot.completions),
                "succeeded": sum(1 for s in own if s.complete),
                "failed": sum(1 for s in own if s.failed_for_good),
                "active": sum(1 for s in running if s.active > 0),
                "suspended": 0,
            }
        )
    return counts


def _condition(type_: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
