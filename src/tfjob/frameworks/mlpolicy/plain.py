"""A runtime without a framework's rules (no mlPolicy source, or xgboost, which Trainer
also runs this for): the node count and the TrainJob's env on the trainer."""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.base import NodeBuild, SideParts, upsert_env, user_envs


class Plain:
    def enforce(self, build: NodeBuild) -> None:
        build.set_trainer_nodes_from_job()
        trainer = build.trainjob.spec.trainer
        container = build.trainer_container()
        if trainer is not None and container is not None:
            upsert_env(container, *user_envs(trainer.env))

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []
