"""Deriving the job's conditions from its replica counts (upstream's UpdateJobStatus).

Types are evaluated in upstream's fixed order. With a Chief/Master the chief decides
Running and Succeeded; without one, Worker does (worker 0, or all workers under the
AllWorkers success policy). A failure of any known type fails the job, unless that
type is being restarted.
"""

from __future__ import annotations

from tfjob.api import constants as c
from tfjob.api.names import is_chief_or_master
from tfjob.api.types import JobCondition, ReplicaStatus
from tfjob.core import conditions
from tfjob.core import pods as podlib
from tfjob.core.pass_state import Pass


def update_job_status(state: Pass) -> None:
    specs = state.job.spec.tf_replica_specs
    has_chief = any(is_chief_or_master(t) for t in specs)
    restarting = conditions.find(state.status, c.RESTARTING)
    for rtype in c.REPLICA_TYPES:
        if rtype not in specs:
            continue
        counts = state.status.replica_statuses.get(rtype, ReplicaStatus())
        if has_chief and is_chief_or_master(rtype):
            _chief_decides(state, rtype, counts)
        elif not has_chief and rtype == c.WORKER:
            _worker_decides(state, counts)
        if counts.failed > 0:
            _replica_failed(state, rtype, counts, restarting)


def _expected(state: Pass, rtype: str, counts: ReplicaStatus) -> int:
    return (state.job.spec.tf_replica_specs[rtype].replicas or 0) - counts.succeeded


def _running(state: Pass) -> None:
    state.condition(c.RUNNING, "True", "TFJobRunning", f"TFJob {state.qualified_name} is running.")


def _succeeded(state: Pass) -> None:
    message = f"TFJob {state.qualified_name} successfully completed."
    if state.succeed(message):
        state.event("Normal", "TFJobSucceeded", message)


def _chief_decides(state: Pass, rtype: str, counts: ReplicaStatus) -> None:
    if counts.active > 0:
        _running(state)
    if _expected(state, rtype, counts) == 0:
        _succeeded(state)


def _worker_decides(state: Pass, counts: ReplicaStatus) -> None:
    all_workers = state.job.spec.success_policy == "AllWorkers"
    if _expected(state, c.WORKER, counts) == 0 or (not all_workers and worker0_completed(state)):
        _succeeded(state)
    elif counts.active > 0:
        _running(state)


def worker0_completed(state: Pass) -> bool:
    """Worker 0's pod Succeeded and its tensorflow container exited 0."""
    for pod in podlib.pods_of_type(state.pods, c.WORKER):
        if pod.metadata.labels.get(c.LABEL_REPLICA_INDEX) != "0":
            continue
        status = podlib.tensorflow_status(pod)
        terminated = status.state.terminated if status is not None else None
        if pod.status.phase == "Succeeded" and terminated is not None:
            return terminated.exit_code == 0
    return False


def _replica_failed(
    state: Pass, rtype: str, counts: ReplicaStatus, restarting: JobCondition | None
) -> None:
    policy = state.job.spec.tf_replica_specs[rtype].restart_policy
    if restarting is not None and policy != "Never":
        # The failed pods are being replaced: keep the job Restarting, not Failed.
        # (better) Only for types that restart: a Never replica failing while another
        # type restarts fails the job instead of leaving it Restarting forever (#2044).
        state.condition(c.RESTARTING, "True", restarting.reason, restarting.message)
        return
    if state.job.spec.enable_dynamic_worker and rtype == c.WORKER:
        return
    message = (
        f"TFJob {state.qualified_name} has failed because {counts.failed} {rtype} "
        f"replica(s) failed. {_details(state, rtype)}"
    ).rstrip()
    if state.fail("TFJobFailed", message):
        state.event("Normal", "TFJobFailed", message)


def _details(state: Pass, rtype: str) -> str:
    """(better) Which replica failed, its exit code and reason (#1749)."""
    failed = [
        podlib.describe_exit(p)
        for p in podlib.pods_of_type(state.pods, rtype)
        if p.status.phase == "Failed"
    ]
    return "; ".join(failed) + "." if failed else ""
