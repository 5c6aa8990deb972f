"""The runtime a TrainJob's `spec.runtimeRef` names, found locally as a cluster finds it.

On a cluster the TrainJob controller reads the TrainingRuntime of that name in the
TrainJob's namespace, or the ClusterTrainingRuntime of that name. Locally the
runtimes are those given with the TrainJob (documents of the same file, or of
`--runtime FILE`), then, for a ClusterTrainingRuntime, the ones Kubeflow Trainer
v2.3.0 ships (`torch-distributed`, `jax-distributed`, `xgboost-distributed`,
`deepspeed-distributed`, `mlx-distributed`) and the ones tfjob adds
(`tensorflow-distributed`, `paddle-distributed`): package data of tfjob
(`runtimes/local/trainer_runtimes/` and `tfjob_runtimes/`, links to
`manifests/overlays/trainer-runtimes` and `tfjob-runtimes`, the overlays a cluster
applies), so an installed tfjob finds them by name too. A
runtime given with the job wins over a shipped one of the same name, as one applied
to a cluster replaces it. None when there is none: the core then fails the TrainJob
with TrainingRuntimeNotFound, as on a cluster.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.api.trainjob import CLUSTER_TRAINING_RUNTIME, GROUP, TRAINING_RUNTIME, TrainJob

#: Trainer's runtimes, then tfjob's (manifests/overlays/trainer-runtimes, tfjob-runtimes).
SHIPPED_FOLDERS = ("trainer_runtimes", "tfjob_runtimes")


def find_runtime(trainjob: TrainJob, given: list[dict[str, Any]]) -> TrainingRuntime | None:
    """The runtime `trainjob` names, from `given` (documents of either runtime kind),
    else shipped (ClusterTrainingRuntime only)."""
    ref = trainjob.spec.runtime_ref
    kind = ref.kind_or_default
    if ref.group_or_default != GROUP:
        return None
    for document in given:
        if _names(document, kind, ref.name, trainjob.metadata.namespace):
            return decode_runtime(document)
    if kind == CLUSTER_TRAINING_RUNTIME:
        shipped = shipped_runtimes().get(ref.name)
        return None if shipped is None else decode_runtime(shipped)
    return None


def _names(document: dict[str, Any], kind: str, name: str, namespace: str) -> bool:
    metadata = document.get("metadata") or {}
    if document.get("kind") != kind or metadata.get("name") != name:
        return False
    # A TrainingRuntime is the TrainJob's namespace's; one without a namespace is
    # applied to the TrainJob's, as kubectl apply does with both in one file.
    return kind != TRAINING_RUNTIME or metadata.get("namespace") in (None, "", namespace)


@functools.cache
def shipped_runtimes() -> dict[str, dict[str, Any]]:
    """The ClusterTrainingRuntimes shipped with tfjob (Trainer's and tfjob's), by name."""
    package = resources.files("tfjob.runtimes.local")
    found: dict[str, dict[str, Any]] = {}
    for folder in SHIPPED_FOLDERS:
        for entry in sorted(package.joinpath(folder).iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".yaml"):
                continue
            for document in yaml.safe_load_all(entry.read_text()):
                if isinstance(document, dict) and document.get("kind") == CLUSTER_TRAINING_RUNTIME:
                    found[str(document["metadata"]["name"])] = document
    return found
