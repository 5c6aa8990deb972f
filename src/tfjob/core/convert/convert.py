"""`convert(job)`: which conversion a v1 job gets, and everything it loses.

A PyTorchJob, JAXJob or XGBoostJob running one template on every replica becomes the
trainer nodes of a torch, jax or xgboost runtime (nodes.py): the shipped one when the
template fits the TrainJob, else a TrainingRuntime of the same kind beside it. Every
other job becomes a TrainingRuntime of its own with a replicated Job per replica type
(replicas.py); an MPIJob's has `mlPolicy.mpi`, so that mpirun reaches its Workers over
ssh with the runtime's hostfile (mpi.py). What has no TrainJob form is listed, field
by field (losses.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfjob.api.types import Job
from tfjob.core.convert import target
from tfjob.core.convert.losses import Loss, restart_loss, run_policy_losses, spec_field_losses
from tfjob.core.convert.mpi import has_workers
from tfjob.core.convert.nodes import convert_nodes, fits_shipped, one_program
from tfjob.core.convert.replicas import convert_replicas
from tfjob.frameworks.mpi import MPIJob
from tfjob.frameworks.registry import framework_of

#: Spec fields a conversion maps (besides runPolicy and the replica specs), by kind.
_MAPPED = {"PyTorchJob": ("nprocPerNode",)}


@dataclass(frozen=True)
class Conversion:
    """The TrainJob, the TrainingRuntime it names when no shipped one fits (else
    None), and what the v1 job says that they do not."""

    trainjob: dict[str, Any]
    runtime: dict[str, Any] | None
    losses: list[Loss] = field(default_factory=list)

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The objects to apply, the runtime first (the TrainJob names it)."""
        return [d for d in (self.runtime, self.trainjob) if d is not None]


def convert(job: Job) -> Conversion:
    """The TrainJob for `job` as written (not defaulted: a default is not a choice the
    user made, so it is not reported lost)."""
    framework = framework_of(job)
    losses = run_policy_losses(
        job.spec.run_policy, job.spec.run_policy.managed_by or job.spec.managed_by
    )
    mapped = _MAPPED.get(framework.kind, ())
    if isinstance(job, MPIJob) and has_workers(job):
        mapped = ("slotsPerWorker",)  # numProcPerNode of the runtime's mlPolicy.mpi
    losses += spec_field_losses(job, framework, mapped)
    for t, spec in job.spec.replica_specs.items():
        loss = restart_loss(f"spec.{framework.spec_field}.{t}", spec.restart_policy)
        if loss is not None:
            losses.append(loss)
    pods = sum(spec.replicas or 0 for spec in job.spec.replica_specs.values())
    if framework.kind in target.SHIPPED and pods and one_program(job, framework):
        nodes = convert_nodes(job, framework, shipped=fits_shipped(job, framework))
        return Conversion(nodes.trainjob, nodes.runtime, losses + nodes.losses)
    replicas = convert_replicas(job, framework)
    return Conversion(replicas.trainjob, replicas.runtime, losses + replicas.losses)
