"""torch: torchrun's PET_* env and the rendezvous port on the trainer.

PET_NNODES is the trainer's node count; PET_NPROC_PER_NODE is numProcPerNode when the
TrainJob gives it, else "auto" when a node has GPUs, else its CPU count (at least 1);
PET_NODE_RANK is the pod's completion index; PET_MASTER_ADDR the first node
(`<tj>-node-0-0.<tj>`), PET_MASTER_PORT 29500. The TrainJob's env comes first, then
these (Trainer's order). `envInjection` targets get the same env.
"""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.base import (
    TRAINER_PORT,
    MLPolicyError,
    NodeBuild,
    SideParts,
    cpus_per_node,
    env_index,
    env_value,
    gpus_per_node,
    upsert_env,
    upsert_port,
    user_envs,
)


def procs_per_node(build: NodeBuild) -> str:
    trainer = build.trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node is not None:
        return str(trainer.num_proc_per_node)
    if gpus_per_node(build.resources_per_node) == 0:
        return str(max(1, cpus_per_node(build.resources_per_node)))
    return "auto"


def pet_env(build: NodeBuild) -> list[dict[str, Any]]:
    return [
        env_value("PET_NNODES", str(build.trainer_nodes())),
        env_value("PET_NPROC_PER_NODE", procs_per_node(build)),
        env_index("PET_NODE_RANK"),
    ]


def master_env(build: NodeBuild) -> list[dict[str, Any]]:
    return [
        env_value("PET_MASTER_ADDR", build.node_address()),
        env_value("PET_MASTER_PORT", str(TRAINER_PORT)),
    ]


class Torch:
    def enforce(self, build: NodeBuild) -> None:
        build.set_trainer_nodes_from_job()
        trainer = build.trainjob.spec.trainer
        container = build.trainer_container()
        if container is not None:
            if trainer is not None:
                upsert_env(container, *user_envs(trainer.env))
            # Trainer v2.3.0 sets PET_* and the port only when the TrainJob has
            # spec.trainer; tfjob sets them always: a TrainJob that runs the runtime's
            # own command needs them as much (docs/decisions/0031-trainjob-core.md).
            upsert_env(container, *pet_env(build), *master_env(build))
            upsert_port(container, {"containerPort": TRAINER_PORT})
        self._inject(build)

    def _inject(self, build: NodeBuild) -> None:
        policy = build.policy.torch
        injection = (policy.env_injection if policy is not None else None) or {}
        for target in injection.get("targets") or []:
            ps = build.by_name(target.get("jobName", ""))
            for name in target.get("containerNames") or []:
                container = None if ps is None else ps.any_container(name)
                if container is None:
                    raise MLPolicyError(
                        f'envInjection target podSet "{target.get("jobName", "")}" container '
                        f'"{name}" not found in runtime template'
                    )
                upsert_env(container, *pet_env(build), *master_env(build))

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []
