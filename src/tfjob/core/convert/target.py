"""The objects a conversion writes: the TrainJob, and a TrainingRuntime beside it.

Names and shapes Trainer v2.3.0 gives them; the replicated Job a v1 replica type
becomes (its pod count, Indexed completions, restart policy and retries).
"""

from __future__ import annotations

import copy
from typing import Any

from tfjob.api import trainjob as tj
from tfjob.api.types import Job
from tfjob.core.convert.losses import MULTIKUEUE, NEAREST_RESTART

#: Which shipped ClusterTrainingRuntime serves a kind, and its mlPolicy source.
SHIPPED = {
    "PyTorchJob": ("torch-distributed", "torch"),
    "JAXJob": ("jax-distributed", "jax"),
    "XGBoostJob": ("xgboost-distributed", "xgboost"),
}
#: The port a torch, jax or xgboost runtime opens on every node for the rendezvous.
RENDEZVOUS_PORT = 29500
#: The pod restart policy a JobSet gives a pod template without one.
JOBSET_RESTART = "OnFailure"


def trainjob(job: Job, runtime_ref: dict[str, str], trainer: dict[str, Any]) -> dict[str, Any]:
    """The TrainJob: the v1 job's name, namespace, labels and annotations (Kueue's
    queue label works on both), its deadline, suspend and MultiKueue managedBy."""
    meta = job.metadata
    metadata: dict[str, Any] = {"name": meta.name}
    if meta.namespace:
        metadata["namespace"] = meta.namespace
    if meta.labels:
        metadata["labels"] = dict(meta.labels)
    if meta.annotations:
        metadata["annotations"] = dict(meta.annotations)
    spec: dict[str, Any] = {"runtimeRef": runtime_ref}
    if trainer:
        spec["trainer"] = trainer
    policy = job.spec.run_policy
    if policy.suspend:
        spec["suspend"] = True
    if policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = policy.active_deadline_seconds
    managed_by = policy.managed_by or job.spec.managed_by
    if managed_by == MULTIKUEUE:
        spec["managedBy"] = managed_by
    return {"apiVersion": tj.API_VERSION, "kind": tj.KIND, "metadata": metadata, "spec": spec}


def cluster_runtime_ref(name: str) -> dict[str, str]:
    return {"name": name, "apiGroup": tj.GROUP, "kind": tj.CLUSTER_TRAINING_RUNTIME}


def own_runtime_ref(job: Job) -> dict[str, str]:
    return {"name": job.metadata.name, "apiGroup": tj.GROUP, "kind": tj.TRAINING_RUNTIME}


def training_runtime(
    job: Job, ml_policy: dict[str, Any] | None, jobset_spec: dict[str, Any]
) -> dict[str, Any]:
    """A TrainingRuntime named as the job, in its namespace, for it alone."""
    metadata: dict[str, Any] = {"name": job.metadata.name}
    if job.metadata.namespace:
        metadata["namespace"] = job.metadata.namespace
    spec: dict[str, Any] = {}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    spec["template"] = {"spec": jobset_spec}
    return {
        "apiVersion": tj.API_VERSION,
        "kind": tj.TRAINING_RUNTIME,
        "metadata": metadata,
        "spec": spec,
    }


def replicated_job(
    name: str,
    pods: int,
    template: dict[str, Any],
    restart_policy: str,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One JobSet replicated Job of `pods` Indexed pods from a v1 replica template.

    A pod that restarts in place (OnFailure) is retried as the v1 operator's kubelet
    would, without limit; one that does not (Never, ExitCode) fails its Job at once, as
    it fails the v1 job (a Job's default of 6 retries would run it again)."""
    pod = copy.deepcopy(template)
    pod_spec = pod.setdefault("spec", {})
    policy = NEAREST_RESTART.get(restart_policy, restart_policy) or JOBSET_RESTART
    pod_spec["restartPolicy"] = policy
    job_spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed",
        "backoffLimit": 0 if policy == "Never" else 2147483647,
        "template": pod,
    }
    job_template: dict[str, Any] = {"spec": job_spec}
    if labels:
        job_template = {"metadata": {"labels": labels}, "spec": job_spec}
    return {"name": name, "replicas": 1, "template": job_template}
