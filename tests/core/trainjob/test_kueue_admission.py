"""Kueue's TrainJob integration, as the core sees it: Kueue admits a TrainJob by
writing its flavour into a runtime patch of its own (manager kueue.x-k8s.io/manager)
while the TrainJob is suspended, then unsuspends it; it evicts by suspending it,
waiting until `jobsStatus` counts no active job, then emptying that patch. Each pass
here is one the operator makes along that path, with the JobSet it then observes."""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.trainjob import TrainJob, TrainJobStatus
from tfjob.core.trainjob.plan import Observed, TrainJobPlan

from .conftest import applied, plan, replicated, trainjob
from .test_reconcile import RT

KUEUE = "kueue.x-k8s.io/manager"
TOLERATION = {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


def _kueue_patch(admitted: dict[str, Any] | None) -> dict[str, Any]:
    """Kueue's patch as its webhook makes it (an empty JobSet spec), or as its
    admission fills it: the pod set `node` with `admitted` as the pod spec."""
    spec: dict[str, Any] = {}
    if admitted is not None:
        pod = {"metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}}, "spec": admitted}
        spec["replicatedJobs"] = [{"name": "node", "template": {"spec": {"template": pod}}}]
    return {"manager": KUEUE, "trainingRuntimeSpec": {"template": {"spec": spec}}}


def _trainjob(suspend: bool, admitted: dict[str, Any] | None, status: Any = None) -> TrainJob:
    job = trainjob("rt", suspend=suspend, runtimePatches=[_kueue_patch(admitted)])
    if status is None:
        return job
    return msgspec.structs.replace(job, status=msgspec.convert(status, TrainJobStatus))


def _observed(suspend: bool, active: int, first: TrainJobPlan) -> Observed:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj"},
        "spec": {"suspend": suspend},
        "status": {
            "replicatedJobsStatus": [
                {"name": "node", "ready": active, "succeeded": 0, "failed": 0,
                 "active": active, "suspended": 0 if active else 1}
            ]
        },
    }  # fmt: skip
    snapshot = applied(first, "ConfigMap")  # the first pass wrote it
    return Observed(jobset=jobset, snapshot=snapshot)


def _pod(result: TrainJobPlan) -> dict[str, Any]:
    jobset = applied(result, "JobSet")
    template: dict[str, Any] = replicated(jobset, "node")["template"]["spec"]["template"]
    return template


def _suspended(result: TrainJobPlan) -> tuple[str, str]:
    (cond,) = [c for c in result.status.conditions if c.type == "Suspended"]
    return cond.status, cond.reason


def test_admission_eviction_and_readmission_reach_the_jobset() -> None:
    flavour_a = {"nodeSelector": {"pool": "a"}, "tolerations": [TOLERATION]}
    # Created: Kueue's webhook suspended it; the JobSet is made suspended, unplaced.
    waiting = plan(_trainjob(True, None), RT)
    assert applied(waiting, "JobSet")["spec"]["suspend"] is True
    assert "nodeSelector" not in _pod(waiting)["spec"]
    status = msgspec.to_builtins(waiting.status)

    # Admitted: the patch holds the flavour, then suspend is false; the suspended
    # JobSet is applied running, its pods placed by the flavour.
    admitted = plan(_trainjob(False, flavour_a, status), RT, _observed(True, 0, waiting))
    assert applied(admitted, "JobSet")["spec"]["suspend"] is False
    pod = _pod(admitted)
    assert pod["spec"]["nodeSelector"] == {"pool": "a"}
    assert pod["spec"]["tolerations"] == [TOLERATION]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"
    assert _suspended(admitted) == ("False", "Resumed")
    status = msgspec.to_builtins(admitted.status)

    # Evicted: suspended with the flavour still in the patch, its JobSet running with
    # an active job: the JobSet is applied suspended, and the active count is reported
    # as it is (Kueue waits for 0 before it frees the quota).
    evicted = plan(_trainjob(True, flavour_a, status), RT, _observed(False, 1, waiting))
    assert applied(evicted, "JobSet")["spec"]["suspend"] is True
    assert _suspended(evicted) == ("True", "Suspended")
    assert [j.active for j in evicted.status.jobs_status] == [1]
    status = msgspec.to_builtins(evicted.status)

    # The JobSet's jobs suspended, Kueue empties its patch: the suspended JobSet loses
    # the flavour, and the status says no job is active.
    emptied = plan(_trainjob(True, None, status), RT, _observed(True, 0, waiting))
    assert applied(emptied, "JobSet")["spec"]["suspend"] is True
    assert "nodeSelector" not in _pod(emptied)["spec"]
    assert [j.active for j in emptied.status.jobs_status] == [0]
    status = msgspec.to_builtins(emptied.status)

    # Admitted again, to another flavour: the JobSet resumes with that one.
    flavour_b = {"nodeSelector": {"pool": "b"}}
    again = plan(_trainjob(False, flavour_b, status), RT, _observed(True, 0, waiting))
    assert applied(again, "JobSet")["spec"]["suspend"] is False
    assert _pod(again)["spec"]["nodeSelector"] == {"pool": "b"}
    assert _suspended(again) == ("False", "Resumed")


def test_a_running_admitted_trainjob_is_left_alone() -> None:
    """Admitted and running: no JobSet write (Kueue changes nothing more until it
    evicts, and the CRD refuses a patch change while the TrainJob runs)."""
    waiting = plan(_trainjob(True, None), RT)
    flavour = {"nodeSelector": {"pool": "a"}}
    running = plan(_trainjob(False, flavour), RT, _observed(False, 1, waiting))
    assert running.actions == []
