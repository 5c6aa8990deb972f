"""What MPIJob's operator adds to its pods, in a runtime of the job's own.

A worker without a command runs `sleep 365d` (mpirun starts the ranks in it) and a
launcher that asks for no GPU gets empty NVIDIA_* (so none is given to it by
mistake): both kept. How the launcher's mpirun reaches the workers (kubexec.sh,
delivered with kubectl, and the hostfile ConfigMap) has no TrainJob form: lost.
"""

from __future__ import annotations

from typing import Any

from tfjob.api.names import replica_key
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.mlpolicy.base import upsert_env
from tfjob.frameworks.mpi import LAUNCHER, WORKER, MPIJob, is_gpu_launcher

#: What MPIJob's operator gives its launcher so that mpirun reaches the workers
#: (kubexec.sh, delivered with kubectl, and the hostfile ConfigMap): a plain runtime has
#: none of it; a runtime with mlPolicy.mpi reaches them over ssh, with sshd in them.
_MPI_LAUNCHER_ENV = (
    "OMPI_MCA_plm_rsh_agent",
    "OMPI_MCA_orte_default_hostfile",
    "I_MPI_HYDRA_BOOTSTRAP",
    "I_MPI_HYDRA_BOOTSTRAP_EXEC",
)
#: What it gives a launcher that asks for no GPU, so none is given to it by mistake.
_NO_GPU_ENV = (
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
)


def mpi_parts(job: MPIJob, jobs: list[dict[str, Any]], container: str) -> list[Loss]:
    """What MPIJob's operator adds: a worker's `sleep 365d` (when it has no command)
    and the launcher's GPU guard kept; how mpirun reaches the workers lost."""
    worker = next((j for j in jobs if j["name"] == replica_key(WORKER)), None)
    containers = [] if worker is None else _containers(worker)
    if containers and not containers[0].get("command"):
        containers[0]["command"], containers[0]["args"] = ["sleep"], ["365d"]
    launcher = next((j for j in jobs if j["name"] == replica_key(LAUNCHER)), None)
    if launcher is None:
        return []
    if not is_gpu_launcher(job):
        for c in _containers(launcher):
            if c.get("name") == container:
                upsert_env(c, *(dict(e) for e in _NO_GPU_ENV))
    return [
        Loss(
            f"spec.mpiReplicaSpecs.{LAUNCHER}.env[{name}]",
            "how the v1 launcher's mpirun reaches the workers (kubexec.sh, the hostfile) "
            "has no TrainJob form: a runtime with mlPolicy.mpi uses ssh, with sshd in "
            "the workers",
        )
        for name in _MPI_LAUNCHER_ENV
    ]


def _containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = (
        job["template"]["spec"]["template"].get("spec", {}).get("containers") or []
    )
    return containers
