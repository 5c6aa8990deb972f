"""Typed model of Trainer's TrainingRuntime and ClusterTrainingRuntime.

Both kinds have the same spec: `mlPolicy` (numNodes and one source: torch, mpi, jax,
xgboost or flux, saying which env and parts the trainer gets), `podGroupPolicy`
(coscheduling or volcano) and `template`, a JobSet spec with its metadata. The template
is kept as the plain mapping it was written as, so every JobSet and pod field, known to
this model or not, reaches the JobSet built from it.

The CRD's defaults for an MPI source (numProcPerNode 1, OpenMPI, /root/.ssh, the
launcher not a node) and coscheduling's 60 s timeout are applied where they are read,
so a runtime loaded from a file without the API server's defaulting builds the same.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.trainjob import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, Metadata
from tfjob.api.wire import Wire

#: The label naming a runtime's framework (torch, deepspeed, mlx, jax, xgboost).
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"


class TorchPolicy(Wire):
    # {targets: [{jobName, containerNames}]}: other containers that get the PET_* env.
    env_injection: dict[str, Any] | None = None


class MPIPolicy(Wire):
    num_proc_per_node: int | None = None
    mpi_implementation: str | None = None
    ssh_auth_mount_path: str | None = None
    run_launcher_as_node: bool | None = None

    @property
    def slots(self) -> int:
        return 1 if self.num_proc_per_node is None else self.num_proc_per_node

    @property
    def implementation(self) -> str:
        return self.mpi_implementation or "OpenMPI"

    @property
    def mount_path(self) -> str:
        return self.ssh_auth_mount_path or "/root/.ssh"

    @property
    def launcher_as_node(self) -> bool:
        return bool(self.run_launcher_as_node)


class MLPolicy(Wire):
    num_nodes: int | None = None
    torch: TorchPolicy | None = None
    mpi: MPIPolicy | None = None
    flux: dict[str, Any] | None = None
    jax: dict[str, Any] | None = None
    xgboost: dict[str, Any] | None = None

    @property
    def source(self) -> str | None:
        """The one source set ("torch", "mpi", ...), None for a plain runtime."""
        for name in ("torch", "mpi", "flux", "jax", "xgboost"):
            if getattr(self, name) is not None:
                return name
        return None


class PodGroupPolicy(Wire):
    coscheduling: dict[str, Any] | None = None
    volcano: dict[str, Any] | None = None


class TrainingRuntimeSpec(Wire):
    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None
    # {metadata: {labels, annotations}, spec: <JobSet spec>}, raw.
    template: dict[str, Any] = {}


class TrainingRuntime(Wire):
    """A TrainingRuntime (namespaced) or ClusterTrainingRuntime (cluster-wide): `kind`
    tells which; the two differ only in scope."""

    api_version: str = ""
    kind: str = ""
    metadata: Metadata = msgspec.field(default_factory=Metadata)
    spec: TrainingRuntimeSpec = msgspec.field(default_factory=TrainingRuntimeSpec)

    @property
    def namespaced(self) -> bool:
        return self.kind == TRAINING_RUNTIME


RUNTIME_KINDS = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)


def decode_runtime(document: dict[str, Any]) -> TrainingRuntime:
    """A runtime of either kind from its decoded JSON or YAML."""
    return msgspec.convert(document, TrainingRuntime, strict=False)
