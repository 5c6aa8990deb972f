"""resourcesPerNode: the TrainJob's resources for each trainer node.

They are strategic-merged into the `node` container of the trainer step (and, with
an MPI runtime whose launcher is a node, of the `node` job): limits and requests key
by key, the TrainJob's value winning. Trainer writes back only limits and requests,
in Go's canonical form.
"""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.base import ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE
from tfjob.frameworks.mlpolicy.quantity import canonical_resources


def merged_resources(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` merged into `base`, as limits and requests."""
    merged: dict[str, Any] = {}
    for key in ("limits", "requests"):
        if key in override and override[key] is None:
            continue
        amounts = {**(base.get(key) or {}), **(override.get(key) or {})}
        if key in base or key in override:
            merged[key] = amounts
    return canonical_resources(merged)


def apply_resources(pod_spec: dict[str, Any], resources: dict[str, Any]) -> None:
    """Merge `resources` into the pod's first `node` container."""
    for container in pod_spec.get("containers") or []:
        if container.get("name") == NODE:
            container["resources"] = merged_resources(container.get("resources") or {}, resources)
            return


def runtime_node_resources(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The resources of the first trainer (`node`-named or trainer-step job) `node`
    container: what a node has when the TrainJob does not say."""
    for job in jobs:
        labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if job.get("name") != NODE and labels.get(ANCESTOR_LABEL) != ANCESTOR_TRAINER:
            continue
        pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        for container in pod.get("containers") or []:
            if container.get("name") == NODE:
                return dict(container.get("resources") or {})
    return {}
