"""xgboost: the DMLC tracker env on the trainer (the first node is the tracker, at
29500), DMLC_TASK_ID the completion index, DMLC_NUM_WORKER nodes x GPUs per node (at
least one worker a node), and the port 29500.

Trainer runs its plain-runtime step for xgboost too, in an order that depends on Go's
map iteration at start-up; tfjob fixes it: the TrainJob's env first, then DMLC_*.
"""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.base import (
    TRAINER_PORT,
    NodeBuild,
    SideParts,
    env_index,
    env_value,
    gpus_per_node,
    upsert_env,
    upsert_port,
)
from tfjob.frameworks.mlpolicy.plain import Plain


class XGBoost:
    def enforce(self, build: NodeBuild) -> None:
        Plain().enforce(build)
        container = build.trainer_container()
        if build.by_ancestor("trainer") is None or container is None:
            return
        workers = build.trainer_nodes() * max(1, gpus_per_node(build.resources_per_node))
        # Trainer v2.3.0 only with spec.trainer; tfjob always (as torch.py says).
        upsert_env(
            container,
            env_value("DMLC_TRACKER_URI", build.node_address()),
            env_value("DMLC_TRACKER_PORT", str(TRAINER_PORT)),
            env_index("DMLC_TASK_ID"),
            env_value("DMLC_NUM_WORKER", str(workers)),
        )
        upsert_port(container, {"containerPort": TRAINER_PORT})

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []
