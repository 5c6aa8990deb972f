"""Which side objects the shell reads for a TrainJob pass (core/trainjob/reads.py):
what the plan looks at, read by name, and nothing once no pass makes objects."""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.trainjob import TrainJob, TrainJobStatus
from tfjob.core.trainjob.plan import Observed
from tfjob.core.trainjob.reads import reads, snapshot_read

from .conftest import plan, runtime, trainjob

TEMPLATE: dict[str, Any] = {
    "spec": {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {
                        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                    },
                    "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}},
                },
            }
        ]
    }
}
MPI = runtime(
    {
        "mlPolicy": {"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI"}},
        "template": TEMPLATE,
    }
)
TORCH = runtime({"mlPolicy": {"torch": {}}, "template": TEMPLATE})
GANG = runtime(
    {"mlPolicy": {"torch": {}}, "podGroupPolicy": {"coscheduling": {}}, "template": TEMPLATE}
)


def _with(job: TrainJob, conditions: list[dict[str, Any]]) -> TrainJob:
    status = msgspec.convert({"conditions": conditions}, TrainJobStatus)
    return msgspec.structs.replace(job, status=status)


def test_the_snapshot_then_what_the_runtime_has() -> None:
    job = trainjob()
    first = snapshot_read(job)
    assert first is not None and (first.name, first.field) == ("tj-runtime-snapshot", "snapshot")
    assert reads(job, [TORCH]) == []
    assert [(r.kind.kind, r.name, r.field) for r in reads(job, [MPI])] == [
        ("ConfigMap", "tj-mpi-hostfile", "mpi_hostfile")
    ]
    assert [(r.kind.kind, r.name) for r in reads(job, [TORCH, GANG])] == [("PodGroup", "tj")]


def test_nothing_once_no_pass_makes_objects() -> None:
    at = "2026-12-01T10:00:10Z"
    complete = {
        "type": "Complete",
        "status": "True",
        "reason": "x",
        "message": "",
        "lastTransitionTime": at,
    }
    deadline = {
        "type": "Failed",
        "status": "True",
        "reason": "DeadlineExceeded",
        "message": "",
        "lastTransitionTime": at,
    }
    for job in (_with(trainjob(), [complete]), _with(trainjob(), [deadline])):
        assert snapshot_read(job) is None
        assert reads(job, [MPI]) == []
        # The core agrees: a pass of it writes nothing.
        assert plan(job, MPI, Observed()).actions == []
    not_found = {"type": "Failed", "status": "True", "reason": "TrainingRuntimeNotFound"}
    waiting = _with(trainjob(), [{**not_found, "message": "", "lastTransitionTime": at}])
    assert snapshot_read(waiting) is not None  # derived again: its runtime may exist now
    assert plan(waiting, TORCH, Observed()).actions != []


def test_nothing_for_a_trainjob_another_controller_manages() -> None:
    theirs = trainjob(managedBy="kueue.x-k8s.io/multikueue")
    assert snapshot_read(theirs) is None
    assert reads(theirs, [MPI]) == []
