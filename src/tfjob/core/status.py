"""Deriving the job's conditions from its replica counts (upstream's UpdateJobStatus).

Types are evaluated in the kind's fixed order. With a master type (TFJob's Chief or
Master, PyTorchJob's Master) the master decides Running and Succeeded; without one,
the Workers do, by the kind's rule (`Framework.workers_succeeded`: TFJob's worker 0 or
all workers, PyTorchJob's all workers or, elastic, any). A failure of any known type
fails the job, unless that type is being restarted or the kind tolerates it.
"""

from __future__ import annotations

from tfjob.api import constants as c
from tfjob.api.types import JobCondition, ReplicaStatus
from tfjob.core import conditions
from tfjob.core import pods as podlib
from tfjob.core.pass_state import Pass


def update_job_status(state: Pass) -> None:
    framework = state.framework
    specs = state.job.spec.replica_specs
    has_master = framework.has_master(state.job)
    restarting = conditions.find(state.status, c.RESTARTING)
    for rtype in framework.replica_types:
        if rtype not in specs:
            continue
        counts = state.status.replica_statuses.get(rtype, ReplicaStatus())
        if has_master and rtype in framework.master_types:
            _master_decides(state, rtype, counts)
        elif not has_master and rtype == c.WORKER:
            _workers_decide(state, counts)
        if counts.failed > 0:
            _replica_failed(state, rtype, counts, restarting)


def _expected(state: Pass, rtype: str, counts: ReplicaStatus) -> int:
    return (state.job.spec.replica_specs[rtype].replicas or 0) - counts.succeeded


def _running(state: Pass) -> None:
    state.condition(
        c.RUNNING,
        "True",
        state.framework.reason("Running"),
        state.framework.message("running", state.job),
    )


def _succeeded(state: Pass) -> None:
    message = state.framework.message("succeeded", state.job)
    if state.succeed(message):
        state.event("Normal", state.framework.reason("Succeeded"), message)


def _master_decides(state: Pass, rtype: str, counts: ReplicaStatus) -> None:
    if counts.active > 0:
        _running(state)
    if _expected(state, rtype, counts) == 0:
        _succeeded(state)


def _workers_decide(state: Pass, counts: ReplicaStatus) -> None:
    if state.framework.workers_succeeded(state.job, counts, state.pods):
        _succeeded(state)
    elif counts.active > 0:
        _running(state)


def _replica_failed(
    state: Pass, rtype: str, counts: ReplicaStatus, restarting: JobCondition | None
) -> None:
    policy = state.job.spec.replica_specs[rtype].restart_policy
    if restarting is not None and policy != "Never":
        # The failed pods are being replaced: keep the job Restarting, not Failed.
        # (better) Only for types that restart: a Never replica failing while another
        # type restarts fails the job instead of leaving it Restarting forever (#2044).
        state.condition(c.RESTARTING, "True", restarting.reason, restarting.message)
        return
    if state.framework.tolerates_failure(state.job, rtype):
        return
    failed = state.framework.message("failed", state.job, count=counts.failed, rtype=rtype)
    message = f"{failed} {_details(state, rtype)}".rstrip()
    pods = podlib.pods_of_type(state.pods, rtype)
    reason = state.framework.failed_reason(state.job, rtype, pods)
    if state.fail(reason, message):
        state.event("Normal", reason, message)


def _details(state: Pass, rtype: str) -> str:
    """(better) Which replica failed, its exit code and reason (#1749)."""
    failed = [
        state.describe_exit(p)
        for p in podlib.pods_of_type(state.pods, rtype)
        if p.status.phase == "Failed"
    ]
    return "; ".join(failed) + "." if failed else ""
