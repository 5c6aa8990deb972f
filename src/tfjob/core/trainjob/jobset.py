"""The JobSet a TrainJob becomes, with the side objects its runtime needs.

The steps follow Trainer v2.3.0's (`pkg/runtime/core`, the framework plugins, the
JobSet builder), each one's effect landing where Trainer's lands:
1. the runtime's template, its runtimePatches merged in order (patches.py), with the
   empty parts Go's typed structs write (typed.py); the JobSet's labels and
   annotations are the template's and the patches' (the TrainJob's own do not
   propagate);
2. one pod set per replicated job: its count is the template's parallelism, or for the
   trainer step (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`) the
   runtime's numNodes; resourcesPerNode merged into the trainer's `node` container
   (resources.py);
3. the mlPolicy source's handler (frameworks/mlpolicy): node count, env, ports, volumes
   (with no source, tensorflow's or paddle's when the runtime's framework label says so);
4. the podGroupPolicy's pod label or annotation (podgroup.py);
5. every replicated job's parallelism = completions = its count;
6. the initializers' storage URI, env and secret; the trainer's image, command, args
   and env; replicas 1 for the initializer and trainer steps;
7. spec.suspend (always written), the TrainJob as controlling owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfjob.api.training_runtime import FRAMEWORK_LABEL, MLPolicy, TrainingRuntime
from tfjob.api.trainjob import API_VERSION, KIND, InitializerSource, TrainJob
from tfjob.core.trainjob.patches import patched_metadata, patched_spec
from tfjob.core.trainjob.podgroup import pod_group, pod_marks
from tfjob.core.trainjob.resources import apply_resources, runtime_node_resources
from tfjob.core.trainjob.typed import omitted_empties, with_typed_defaults
from tfjob.frameworks.mlpolicy.base import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    NODE,
    KeyPair,
    MLPolicyError,
    NodeBuild,
    PodSet,
    SideParts,
    env_value,
    upsert_env,
    user_envs,
)
from tfjob.frameworks.mlpolicy.registry import handler_for

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"


@dataclass
class Built:
    """The JobSet, the other objects (MPI Secret and hostfile; PodGroup), and each
    replicated job's pod addresses."""

    jobset: dict[str, Any]
    objects: list[dict[str, Any]] = field(default_factory=list)
    pod_group: dict[str, Any] | None = None
    endpoints: dict[str, list[str]] = field(default_factory=dict)


def owner_reference(trainjob: TrainJob) -> dict[str, Any]:
    """The TrainJob as controlling owner, on everything made for it."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": trainjob.metadata.name,
        "uid": trainjob.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def build(
    trainjob: TrainJob, runtime: TrainingRuntime, *, secret_exists: bool, key_pair: KeyPair | None
) -> Built:
    """The objects for `trainjob` from `runtime`; MLPolicyError if they cannot be made,
    KeyPairNeeded if an MPI Secret is to be made and `key_pair` is None."""
    policy = runtime.spec.ml_policy
    handler = handler_for(
        None if policy is None else policy.source,
        runtime.metadata.labels.get(FRAMEWORK_LABEL),
    )
    if handler is None:
        source = policy.source if policy is not None else None
        raise MLPolicyError(f"mlPolicy.{source} is not supported by tfjob")
    template = runtime.spec.template or {}
    labels, annotations = patched_metadata(
        template.get("metadata") or {}, trainjob.spec.runtime_patches
    )
    spec = patched_spec(template.get("spec") or {}, trainjob.spec.runtime_patches)
    with_typed_defaults(spec)
    nodes = NodeBuild(trainjob=trainjob, policy=policy or MLPolicy(), pod_sets=[])
    nodes.pod_sets = _pod_sets(trainjob, policy, spec)
    nodes.resources_per_node = _resources_per_node(trainjob, spec)
    handler.enforce(nodes)
    pod_labels, pod_annotations = pod_marks(runtime.spec.pod_group_policy, trainjob.metadata.name)
    endpoints = _endpoints(trainjob, spec, nodes.pod_sets)
    for ps in nodes.pod_sets:
        job_spec = ps.job.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = ps.count
    group = pod_group(
        runtime.spec.pod_group_policy, nodes.pod_sets, _object_meta(trainjob), annotations
    )
    _initializers(trainjob, spec)
    _trainer(trainjob, policy, spec)
    _mark_pods(spec, pod_labels, pod_annotations)
    spec["suspend"] = trainjob.spec.suspended
    parts = SideParts(
        owner=owner_reference(trainjob), secret_exists=secret_exists, key_pair=key_pair
    )
    return Built(
        jobset=_jobset(trainjob, spec, labels, annotations),
        objects=handler.objects(nodes, endpoints, parts),
        pod_group=group,
        endpoints=endpoints,
    )


def _object_meta(trainjob: TrainJob) -> dict[str, Any]:
    return {
        "name": trainjob.metadata.name,
        "namespace": trainjob.metadata.namespace,
        "ownerReferences": [owner_reference(trainjob)],
    }


def _jobset(
    trainjob: TrainJob, spec: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": trainjob.metadata.name,
        "namespace": trainjob.metadata.namespace,
    }
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(trainjob)]
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": omitted_empties(spec),
    }


def ancestor_of(job: dict[str, Any]) -> str | None:
    labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(ANCESTOR_LABEL)
    return None if value is None else str(value)


def _pod_sets(trainjob: TrainJob, policy: MLPolicy | None, spec: dict[str, Any]) -> list[PodSet]:
    per_node = trainjob.spec.trainer.resources_per_node if trainjob.spec.trainer else None
    launcher_as_node = policy is not None and policy.mpi is not None and policy.mpi.launcher_as_node
    sets = []
    for job in spec.get("replicatedJobs") or []:
        ancestor = ancestor_of(job)
        count = ((job.get("template") or {}).get("spec") or {}).get("parallelism")
        count = 1 if count is None else int(count)
        trainer_step = ancestor == ANCESTOR_TRAINER and policy is not None
        if trainer_step and policy is not None:
            count = 1 if policy.num_nodes is None else policy.num_nodes
        ps = PodSet(name=str(job.get("name", "")), ancestor=ancestor, count=max(count, 1), job=job)
        if per_node is not None and (trainer_step or (launcher_as_node and ps.name == NODE)):
            apply_resources(ps.pod_spec, per_node)
        sets.append(ps)
    return sets


def _resources_per_node(trainjob: TrainJob, spec: dict[str, Any]) -> dict[str, Any]:
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.resources_per_node is not None:
        return dict(trainer.resources_per_node)
    return runtime_node_resources(spec.get("replicatedJobs") or [])


def _endpoints(
    trainjob: TrainJob, spec: dict[str, Any], pod_sets: list[PodSet]
) -> dict[str, list[str]]:
    """Every pod's address, `<tj>-<job>-<replica>-<index>.<subdomain>`."""
    name = trainjob.metadata.name
    subdomain = (spec.get("network") or {}).get("subdomain") or name
    return {
        ps.name: [
            f"{name}-{ps.name}-{replica}-{index}.{subdomain}"
            for replica in range(int(ps.job.get("replicas") or 1))
            for index in range(ps.count)
        ]
        for ps in pod_sets
    }


def _containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    pod = job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    containers: list[dict[str, Any]] = pod.setdefault("spec", {}).get("containers") or []
    return containers


def _initializers(trainjob: TrainJob, spec: dict[str, Any]) -> None:
    initializer = trainjob.spec.initializer
    sources = {
        DATASET_INITIALIZER: None if initializer is None else initializer.dataset,
        MODEL_INITIALIZER: None if initializer is None else initializer.model,
    }
    for job in spec.get("replicatedJobs") or []:
        step = ancestor_of(job)
        if step not in sources:
            continue
        job["replicas"] = 1
        source = sources[step]
        for container in _containers(job):
            if container.get("name") == step and source is not None:
                _initializer_env(container, source)


def _initializer_env(container: dict[str, Any], source: InitializerSource) -> None:
    if source.storage_uri is not None:
        upsert_env(container, env_value("STORAGE_URI", source.storage_uri))
    upsert_env(container, *user_envs(source.env))
    if source.secret_ref is not None:
        container.setdefault("envFrom", []).append(
            {"secretRef": {"name": source.secret_ref.get("name", "")}}
        )


def _trainer(trainjob: TrainJob, policy: MLPolicy | None, spec: dict[str, Any]) -> None:
    trainer = trainjob.spec.trainer
    launcher_as_node = policy is not None and policy.mpi is not None and policy.mpi.launcher_as_node
    for job in spec.get("replicatedJobs") or []:
        trainer_step = ancestor_of(job) == ANCESTOR_TRAINER
        mpi_node = launcher_as_node and job.get("name") == NODE
        if trainer_step:
            job["replicas"] = 1
        if trainer is None or not (trainer_step or mpi_node):
            continue
        for container in _containers(job):
            if container.get("name") != NODE:
                continue
            if trainer.image is not None:
                # Trainer v2.3.0 gives the image to the trainer step only, so a
                # deepspeed or mlx node job keeps the runtime's; tfjob gives it to the
                # nodes mpirun starts ranks on too (decision 0031).
                container["image"] = trainer.image
            if trainer_step and trainer.command is not None:
                container["command"] = list(trainer.command)
            if trainer_step and trainer.args is not None:
                container["args"] = list(trainer.args)
            upsert_env(container, *user_envs(trainer.env))


def _mark_pods(spec: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]) -> None:
    """The group's label or annotation on every pod. Trainer's builder gives every pod
    template a metadata, empty if there is nothing to put in it."""
    for job in spec.get("replicatedJobs") or []:
        pod = job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        metadata = pod.setdefault("metadata", {})
        if labels:
            metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
        if annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
