"""tensorflow (a runtime labelled `trainer.kubeflow.org/framework: tensorflow`, with no
mlPolicy source): every TF task's pod gets the TF_CONFIG a TFJob's pod would get.

Each replicated job is one TF task type: the trainer step (`node`) is the workers,
and jobs named `chief`, `master`, `ps`, `evaluator` (or `worker`) are those types; other
jobs (initializers) get nothing. The cluster lists every pod at its JobSet host name,
`<tj>-<job>-0-<index>.<tj>:<port>` (the `node` container's `tfjob-port`, else 2222).

A job's pods share one template, but a pod's task index differs: the value is written
once with `$(TFJOB_POD_INDEX)` where the index goes, and TFJOB_POD_INDEX (listed first)
is the pod's completion index, read through the downward API; Kubernetes expands it
when it starts the container, so the value is the TFJob's, byte for byte, in any image
(docs/decisions/0034-tensorflow-and-paddle-trainjobs.md). TF_CONFIG itself is built by
the TFJob framework's own builder (`frameworks.tensorflow.TFConfigs`).

The TrainJob's image, command and args run on every task (the trainer step gets them
from the JobSet build; the other task jobs from here), as a TFJob's replicas usually
run one program that reads its role from TF_CONFIG.
"""

from __future__ import annotations

from typing import Any

from tfjob.api.names import replica_key
from tfjob.api.types import ObjectMeta, ReplicaSpec
from tfjob.frameworks import tensorflow as tf
from tfjob.frameworks.mlpolicy.base import (
    ANCESTOR_TRAINER,
    NODE,
    MLPolicyError,
    NodeBuild,
    PodSet,
    SideParts,
    env_index,
    env_value,
    upsert_env,
    upsert_port,
    user_envs,
)
from tfjob.frameworks.mlpolicy.plain import Plain
from tfjob.frameworks.settings import Settings

FRAMEWORK = "tensorflow"
INDEX_ENV = "TFJOB_POD_INDEX"
#: Replicated job name -> TF replica type (the trainer step is always the workers).
TASK_TYPES = {replica_key(t): t for t in tf.REPLICA_TYPES}


def task_type(ps: PodSet) -> str | None:
    """The TF replica type a replicated job's pods are, or None (not a TF task)."""
    if ps.ancestor == ANCESTOR_TRAINER:
        return tf.WORKER
    if ps.ancestor is not None:
        return None  # an initializer
    return TASK_TYPES.get(ps.name)


def tasks(build: NodeBuild) -> list[tuple[PodSet, str]]:
    """The pod sets that are TF tasks with their types; MLPolicyError on a job TF_CONFIG
    cannot index (more than one replica: a pod knows its completion index only)."""
    found = []
    for ps in build.pod_sets:
        rtype = task_type(ps)
        if rtype is None:
            continue
        replicas = int(ps.job.get("replicas") or 1)
        if replicas != 1 and ps.ancestor != ANCESTOR_TRAINER:
            raise MLPolicyError(
                f"tensorflow runtime: replicatedJobs {ps.name} has replicas {replicas}; "
                "a TF task job needs replicas 1 (set its parallelism instead)"
            )
        found.append((ps, rtype))
    types = [rtype for _, rtype in found]
    if len(set(types)) != len(types):
        raise MLPolicyError(
            f"tensorflow runtime: more than one replicated job per task type in {types}"
        )
    return found


def port_of(ps: PodSet) -> int:
    """The `node` container's `tfjob-port`, else 2222 (the TFJob's rule)."""
    for port in (ps.container(NODE) or {}).get("ports") or []:
        if port.get("name") == tf.PORT_NAME:
            return int(port["containerPort"])
    return tf.PORT


def cluster(build: NodeBuild, found: list[tuple[PodSet, str]]) -> dict[str, list[str]]:
    """Every task's address by lower-case type, in index order."""
    name = build.name
    return {
        replica_key(rtype): [
            f"{name}-{ps.name}-0-{index}.{name}:{port_of(ps)}" for index in range(ps.count)
        ]
        for ps, rtype in found
    }


def equivalent_tfjob(build: NodeBuild, found: list[tuple[PodSet, str]]) -> tf.TFJob:
    """The TFJob whose replicas these pods are (what TF_CONFIG depends on)."""
    specs = {rtype: ReplicaSpec(replicas=ps.count) for ps, rtype in found}
    return tf.TFJob(
        metadata=ObjectMeta(name=build.name, namespace=build.trainjob.metadata.namespace),
        spec=tf.TFJobSpec(tf_replica_specs=specs),
    )


def indexed_config(configs: tf.TFConfigs, rtype: str) -> str | None:
    """TF_CONFIG for every pod of one type, `$(TFJOB_POD_INDEX)` as the task index."""
    value = configs.for_replica(rtype, 0)
    if value is None:
        return None
    task = f'"task":{{"type":"{replica_key(rtype)}","index":0}}'
    assert value.count(task) == 1, value  # the cluster holds only quoted addresses
    return value.replace(task, f'"task":{{"type":"{replica_key(rtype)}","index":$({INDEX_ENV})}}')


class TensorFlow:
    def enforce(self, build: NodeBuild) -> None:
        Plain().enforce(build)
        found = tasks(build)
        addresses = cluster(build, found)
        configs = tf.TFConfigs(equivalent_tfjob(build, found), Settings(local_addresses=addresses))
        for ps, rtype in found:
            container = ps.container(NODE)
            if container is None:
                continue
            if ps.ancestor != ANCESTOR_TRAINER:
                _run_trainer_program(build, container)
            upsert_port(container, {"name": tf.PORT_NAME, "containerPort": port_of(ps)})
            value = indexed_config(configs, rtype)
            if value is not None:
                upsert_env(container, env_index(INDEX_ENV), env_value("TF_CONFIG", value))

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []


def _run_trainer_program(build: NodeBuild, container: dict[str, Any]) -> None:
    """The TrainJob's image, command and args on a chief, PS or evaluator too."""
    trainer = build.trainjob.spec.trainer
    if trainer is None:
        return
    if trainer.image is not None:
        container["image"] = trainer.image
    if trainer.command is not None:
        container["command"] = list(trainer.command)
    if trainer.args is not None:
        container["args"] = list(trainer.args)
    upsert_env(container, *user_envs(trainer.env))
