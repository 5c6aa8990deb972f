"""What a conversion loses: the v1 fields with no TrainJob form, each with its JSON path.

The run policy and the restart policies are the same for every kind, so they are
read here once; what only a kind has (TFJob's successPolicy, PyTorchJob's
elasticPolicy, MPIJob's slotsPerWorker...) is every spec field the conversion does
not map, found by name, so a field added to a kind later is reported, not dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfjob.api.types import Job, RunPolicy, to_dict
from tfjob.frameworks.framework import Framework

#: The value of managedBy both v1 jobs and TrainJobs accept: Kueue's MultiKueue.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
#: Restart policies a Job's pods may have; the others become the nearest of them.
NEAREST_RESTART = {"Always": "OnFailure", "ExitCode": "Never"}


@dataclass(frozen=True)
class Loss:
    """One v1 field that has no TrainJob form, and what becomes of it."""

    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def run_policy_losses(policy: RunPolicy, managed_by: str | None) -> list[Loss]:
    """runPolicy fields with no TrainJob form (activeDeadlineSeconds and suspend map);
    `managed_by`: runPolicy's, else the spec's (tfjob's extension)."""
    base = "spec.runPolicy"
    losses = []
    if policy.clean_pod_policy is not None:
        losses.append(
            Loss(
                f"{base}.cleanPodPolicy",
                f"{policy.clean_pod_policy!r}: a TrainJob's JobSet keeps its finished pods "
                "until the TrainJob is deleted",
            )
        )
    if policy.ttl_seconds_after_finished is not None:
        losses.append(
            Loss(
                f"{base}.ttlSecondsAfterFinished",
                "a finished TrainJob is not deleted after a time",
            )
        )
    if policy.backoff_limit is not None:
        losses.append(
            Loss(
                f"{base}.backoffLimit",
                "no job-wide retry count: each replicated Job's backoffLimit counts "
                "its own pods' retries",
            )
        )
    if policy.scheduling_policy is not None:
        losses.append(
            Loss(
                f"{base}.schedulingPolicy",
                "gang scheduling is the runtime's podGroupPolicy, not set by the conversion",
            )
        )
    if managed_by not in (None, MULTIKUEUE):
        where = base if policy.managed_by is not None else "spec"
        losses.append(
            Loss(
                f"{where}.managedBy",
                f"{managed_by!r}: a TrainJob is managed by Trainer or MultiKueue only",
            )
        )
    return losses


def spec_field_losses(job: Job, framework: Framework[Job], mapped: tuple[str, ...]) -> list[Loss]:
    """The kind's own spec fields (besides its replica specs, runPolicy and the fields
    in `mapped`), each lost."""
    known = {"runPolicy", "managedBy", framework.spec_field, *mapped}
    spec = to_dict(job.spec)
    return [
        Loss(f"spec.{name}", f"{framework.kind}'s {name} has no TrainJob form")
        for name in spec
        if name not in known
    ]


def restart_loss(path: str, policy: str) -> Loss | None:
    """A restartPolicy a Job's pod cannot have: the nearest one it gets instead."""
    nearest = NEAREST_RESTART.get(policy)
    if nearest is None:
        return None
    why = {
        "ExitCode": "a pod that fails is not restarted, whatever its exit code",
        "Always": "a pod that succeeds is not restarted",
    }[policy]
    return Loss(f"{path}.restartPolicy", f"{policy!r} becomes {nearest!r}: {why}")
