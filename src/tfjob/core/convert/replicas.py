"""Any v1 job as a TrainingRuntime of its own: one replicated Job per replica type.

For the kinds Trainer ships no runtime for (TFJob, PaddleJob, MPIJob) and for a
PyTorchJob, JAXJob or XGBoostJob whose replica types run different templates. Each
replica type becomes the replicated Job named after it in lower case (`worker`, `ps`,
...) with its replicas as Indexed pods and its template whole; its pods are
`<job>-<type>-0-<i>.<job>`, and the kind's env (PADDLE_*, ...) goes into the template
with the v1 pod names rewritten to those, where it has a template form (env.py).
A TFJob's runtime is labelled `trainer.kubeflow.org/framework: tensorflow` and its
`tensorflow` containers are named `node` instead: tfjob's TrainJob core then gives
every task's pod the TFJob's TF_CONFIG, its task index expanded from the pod's
completion index (frameworks/mlpolicy/tensorflow.py, decision 0034), which a value
in the template could not say for a type of several pods. A variable read from the
pod's `metadata.name` gets the pod's host name, `<job>-<type>-0-<i>`: a v1 pod's name
is `<job>-<type>-<i>`, its host name too, the same in every run, while a Job's pod is
named with a random suffix (said on standard error). The job succeeds as the v1
job does when the kind has a master type (Chief, Master, Launcher): when its pods
have; without one, when every pod has. The TrainJob names the runtime and overrides
nothing. An MPIJob with Workers gets an MPI runtime instead (mpi.py: `mlPolicy.mpi`,
the Workers as its `node` job, reached over ssh).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tfjob.api.names import replica_key
from tfjob.api.training_runtime import FRAMEWORK_LABEL
from tfjob.api.types import Job
from tfjob.core.convert import mpi, target
from tfjob.core.convert.env import address_rewriter, derive
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.mlpolicy import tensorflow
from tfjob.frameworks.mlpolicy.base import NODE, env_index, upsert_env
from tfjob.frameworks.mpi import MPIJob
from tfjob.frameworks.registry import with_defaults
from tfjob.frameworks.settings import Settings

#: The variable Kubernetes gives each container of an Indexed Job's pod: its index.
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"


@dataclass
class ReplicaConversion:
    trainjob: dict[str, Any]
    runtime: dict[str, Any]
    losses: list[Loss] = field(default_factory=list)


def convert_replicas(job: Job, framework: Framework[Job]) -> ReplicaConversion:
    types = [t for t in framework.replica_types if t in job.spec.replica_specs]
    jobs, losses = _replicated_jobs(job, framework, types)
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
    if isinstance(job, MPIJob) and mpi.has_workers(job):
        ssh = mpi.over_ssh(job, jobs)
        losses += ssh.losses + _pod_names_as_host_names(job, framework, types, jobs)
        runtime = target.training_runtime(job, ssh.ml_policy, ssh.jobset)
        trainjob = target.trainjob(job, target.own_runtime_ref(job), {})
        return ReplicaConversion(trainjob, runtime, losses)
    if isinstance(job, MPIJob):
        losses.extend(mpi.mpi_parts(job, jobs, framework.container_name))
    losses += _pod_names_as_host_names(job, framework, types, jobs)
    runtime = target.training_runtime(job, None, jobset)
    if framework.kind == "TFJob":
        runtime["metadata"]["labels"] = {FRAMEWORK_LABEL: tensorflow.FRAMEWORK}
    return ReplicaConversion(target.trainjob(job, target.own_runtime_ref(job), {}), runtime, losses)


def _replicated_jobs(
    job: Job, framework: Framework[Job], types: list[str]
) -> tuple[list[dict[str, Any]], list[Loss]]:
    """One replicated Job per replica type, the kind's env in its template where it
    has a template form; the env that has none."""
    name = job.metadata.name
    kind_env = framework.pod_env(with_defaults(job), Settings())
    # A TFJob's TF_CONFIG comes from the tensorflow runtime (labelled in convert_replicas).
    given = {"TF_CONFIG"} if framework.kind == "TFJob" else set()
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
        pods = range(spec.replicas or 0)
        derived = derive(
            [[v for v in kind_env.for_replica(t, i) if v["name"] not in given] for i in pods],
            rewrite,
            f"spec.{framework.spec_field}.{t}",
            [addresses[(t, i)] for i in pods],
        )
        losses.extend(derived.losses)
        template = copy.deepcopy(spec.template)
        for c in (template.get("spec") or {}).get("containers") or []:
            if framework.env_on_every_container or c.get("name") == framework.container_name:
                upsert_env(c, *derived.env)
            if given and c.get("name") == framework.container_name:
                c["name"] = NODE
        restart = spec.restart_policy or framework.default_restart_policy
        jobs.append(target.replicated_job(replica_key(t), len(pods), template, restart))
    return jobs, losses


def _pod_names_as_host_names(
    job: Job, framework: Framework[Job], types: list[str], jobs: list[dict[str, Any]]
) -> list[Loss]:
    """Each variable read from `metadata.name` (fieldRef), in the replicated jobs as
    finally named (an MPI runtime's Workers are `node`), set to the pod's host name,
    `<job>-<rjob>-0-$(JOB_COMPLETION_INDEX)`, that index declared first (the Job
    controller then adds none, and adds its own last, where no value can name it)."""
    losses = []
    for t, rjob in zip(types, jobs, strict=True):
        host = f"{job.metadata.name}-{rjob['name']}-0-$({COMPLETION_INDEX_ENV})"
        pod = rjob["template"]["spec"]["template"].get("spec") or {}
        for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            env = c.get("env") or []
            named = [i for i, v in enumerate(env) if _field_path(v) == "metadata.name"]
            for i in named:
                env[i] = {"name": env[i]["name"], "value": host}
                losses.append(
                    Loss(
                        f"spec.{framework.spec_field}.{t}.env[{env[i]['name']}]",
                        "'metadata.name' becomes the pod's host name "
                        f"{job.metadata.name}-{rjob['name']}-0-<index> (a v1 pod's name "
                        "is its host name; a TrainJob's ends in a random suffix)",
                    )
                )
            if named and not any(v.get("name") == COMPLETION_INDEX_ENV for v in env):
                env.insert(0, env_index(COMPLETION_INDEX_ENV))
    return losses


def _field_path(var: dict[str, Any]) -> str | None:
    ref = (var.get("valueFrom") or {}).get("fieldRef") or {}
    path = ref.get("fieldPath")
    return path if isinstance(path, str) else None
