"""Any v1 job as a TrainingRuntime of its own: one replicated Job per replica type.

For the kinds Trainer ships no runtime for (TFJob, PaddleJob, MPIJob) and for a
PyTorchJob, JAXJob or XGBoostJob whose replica types run different templates. Each
replica type becomes the replicated Job named after it in lower case (`worker`, `ps`,
...) with its replicas as Indexed pods and its template whole; its pods are
`<job>-<type>-0-<i>.<job>`, and the kind's env (TF_CONFIG, PADDLE_*, ...) goes into
the template with the v1 pod names rewritten to those, where it has a template form
(env.py). The job succeeds as the v1 job does when the kind has a master type (Chief,
Master, Launcher): when its pods have; without one, when every pod has. No job is
the trainer step, so the TrainJob names the runtime and overrides nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tfjob.api.names import replica_key
from tfjob.api.types import Job
from tfjob.core.convert import target
from tfjob.core.convert.env import address_rewriter, derive
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.mlpolicy.base import upsert_env
from tfjob.frameworks.mpi import LAUNCHER, WORKER, MPIJob, is_gpu_launcher
from tfjob.frameworks.registry import with_defaults
from tfjob.frameworks.settings import Settings

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


@dataclass
class ReplicaConversion:
    trainjob: dict[str, Any]
    runtime: dict[str, Any]
    losses: list[Loss] = field(default_factory=list)


def convert_replicas(job: Job, framework: Framework[Job]) -> ReplicaConversion:
    name = job.metadata.name
    types = [t for t in framework.replica_types if t in job.spec.replica_specs]
    defaulted = with_defaults(job)
    kind_env = framework.pod_env(defaulted, Settings())
    addresses = {
        (t, i): f"{name}-{replica_key(t)}-0-{i}.{name}"
        for t in types
        for i in range(job.spec.replica_specs[t].replicas or 0)
    }
    rewrite = address_rewriter(name, addresses)
    losses: list[Loss] = []
    jobs = []
    for t in types:
        spec = job.spec.replica_specs[t]
        pods = spec.replicas or 0
        path = f"spec.{framework.spec_field}.{t}"
        derived = derive(
            [kind_env.for_replica(t, i) for i in range(pods)],
            rewrite,
            path,
            [addresses[(t, i)] for i in range(pods)],
        )
        losses.extend(derived.losses)
        template = copy.deepcopy(spec.template)
        for c in (template.get("spec") or {}).get("containers") or []:
            if framework.env_on_every_container or c.get("name") == framework.container_name:
                upsert_env(c, *derived.env)
        restart = spec.restart_policy or framework.default_restart_policy
        jobs.append(target.replicated_job(replica_key(t), pods, template, restart))
    jobset: dict[str, Any] = {"replicatedJobs": jobs}
    masters = [replica_key(t) for t in types if t in framework.master_types]
    if masters:
        jobset["successPolicy"] = {"operator": "All", "targetReplicatedJobs": masters}
    elif framework.kind == "TFJob":
        losses.append(
            Loss(
                f"spec.{framework.spec_field}",
                "a TFJob without a Chief succeeds when Worker 0 does; the JobSet when "
                "every pod has",
            )
        )
    if isinstance(job, MPIJob):
        losses.extend(_mpi(job, jobs, framework.container_name))
    runtime = target.training_runtime(job, None, jobset)
    return ReplicaConversion(target.trainjob(job, target.own_runtime_ref(job), {}), runtime, losses)


def _mpi(job: MPIJob, jobs: list[dict[str, Any]], container: str) -> list[Loss]:
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
