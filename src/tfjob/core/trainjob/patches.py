"""A TrainJob's runtimePatches, applied in order as Trainer applies them.

Each patch's `trainingRuntimeSpec.template.spec` is strategic-merged into the
runtime's JobSet spec: maps merge key by key, lists Kubernetes declares mergeable
merge by their key (replicated jobs and containers by name, volume mounts by mount
path, ...), other lists are replaced, a null deletes. Two managers' nodeSelectors
thus combine. The replicated jobs keep the runtime's order. Each patch's
`template.metadata` labels and annotations are added to the JobSet's.
"""

from __future__ import annotations

import copy
from typing import Any

from tfjob.api.trainjob import RuntimePatch

#: List fields with a merge strategy in the JobSet and core/v1 types, and their keys.
MERGE_KEYS = {
    "replicatedJobs": "name",
    "dependsOn": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


def strategic_merge(original: Any, patch: Any, field: str = "") -> Any:
    """`patch` merged into `original` (neither changed)."""
    if isinstance(original, dict) and isinstance(patch, dict):
        merged = dict(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, key)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(original, list) and isinstance(patch, list) and field in MERGE_KEYS:
        return _merge_list(original, patch, MERGE_KEYS[field])
    return copy.deepcopy(patch)


def _merge_list(original: list[Any], patch: list[Any], key: str) -> list[Any]:
    """Merge by `key`, then order as apimachinery's strategic merge does: the items
    the patch names in the patch's order and the others in the original's, merged
    back by their original places; an item new to the list goes before the rest."""
    merged = [copy.deepcopy(item) for item in original]
    for item in patch:
        at = _find(merged, key, item)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = strategic_merge(merged[at], item)
    patch_keys = [_key(item, key) for item in patch]
    server_keys = [_key(item, key) for item in original]
    named = sorted(
        (m for m in merged if _key(m, key) in patch_keys),
        key=lambda m: patch_keys.index(_key(m, key)),
    )
    others = sorted(
        (m for m in merged if _key(m, key) not in patch_keys),
        key=lambda m: server_keys.index(_key(m, key)) if _key(m, key) in server_keys else 0,
    )
    return _merge_sorted(others, named, server_keys, key)


def _merge_sorted(left: list[Any], right: list[Any], order: list[Any], key: str) -> list[Any]:
    result: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            result.append(left[i])
            i += 1
        elif i >= len(left):
            result.append(right[j])
            j += 1
        else:
            lk, rk = _key(left[i], key), _key(right[j], key)
            if lk in order and rk in order and order.index(lk) < order.index(rk):
                result.append(left[i])
                i += 1
            else:
                result.append(right[j])
                j += 1
    return result


def _key(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else item


def _find(items: list[Any], key: str, item: Any) -> int | None:
    if not isinstance(item, dict):
        return None
    return next(
        (
            i
            for i, have in enumerate(items)
            if isinstance(have, dict) and have.get(key) == item.get(key)
        ),
        None,
    )


def _template(patch: RuntimePatch) -> dict[str, Any]:
    spec = patch.training_runtime_spec or {}
    template: dict[str, Any] = spec.get("template") or {}
    return template


def patched_spec(spec: dict[str, Any], patches: list[RuntimePatch]) -> dict[str, Any]:
    """The runtime's JobSet spec with every patch's spec merged, in order."""
    order = {job.get("name"): i for i, job in enumerate(spec.get("replicatedJobs") or [])}
    merged = copy.deepcopy(spec)
    for patch in patches:
        body = _template(patch).get("spec")
        if body is not None:
            merged = strategic_merge(merged, body)
    jobs = merged.get("replicatedJobs")
    if jobs:
        # A name the runtime lacks sorts first (Go's zero for a missing map key).
        merged["replicatedJobs"] = sorted(jobs, key=lambda job: order.get(job.get("name"), 0))
    return dict(merged)


def patched_metadata(
    metadata: dict[str, Any], patches: list[RuntimePatch]
) -> tuple[dict[str, str], dict[str, str]]:
    """The JobSet's labels and annotations: the template's, then each patch's."""
    labels = dict(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    for patch in patches:
        meta = _template(patch).get("metadata") or {}
        labels.update(meta.get("labels") or {})
        annotations.update(meta.get("annotations") or {})
    return labels, annotations
