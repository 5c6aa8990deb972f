"""jax: JAX_NUM_PROCESSES, JAX_PROCESS_ID (the completion index) and
JAX_COORDINATOR_ADDRESS (`<tj>-node-0-0.<tj>:29500`) on the trainer, before the
TrainJob's env (which the JobSet build adds after), and the port 29500."""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.base import (
    TRAINER_PORT,
    NodeBuild,
    SideParts,
    env_index,
    env_value,
    upsert_env,
    upsert_port,
)


class Jax:
    def enforce(self, build: NodeBuild) -> None:
        build.set_trainer_nodes_from_job()
        container = build.trainer_container()
        if container is None:
            return
        # Trainer v2.3.0 only with spec.trainer; tfjob always (as torch.py says).
        upsert_env(
            container,
            env_value("JAX_NUM_PROCESSES", str(build.trainer_nodes())),
            env_index("JAX_PROCESS_ID"),
            env_value("JAX_COORDINATOR_ADDRESS", f"{build.node_address()}:{TRAINER_PORT}"),
        )
        upsert_port(container, {"containerPort": TRAINER_PORT})

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []
