"""What Trainer's round trip of the template through Go's typed structs writes.

Trainer reads the runtime's JobSet spec into typed Go structs and back before it
applies it, so every struct-valued field without `omitempty` effect is written even
when empty: each replicated job's Job template and pod template get `metadata: {}`,
each container and init container `resources: {}`; and every quantity is written
in Go's canonical form (`1000m` as `1`, a number as a string). What Go omits when
empty is left out (`omitted_empties`): every empty list (`command: []` from a
TrainJob removes the runtime's command, as in Trainer) and every empty map (labels,
a nodeSelector, limits). tfjob writes the same, so the applied JobSet is the same
object.
"""

from __future__ import annotations

from typing import Any

from tfjob.frameworks.mlpolicy.quantity import canonical, canonical_resources


def with_typed_defaults(spec: dict[str, Any]) -> None:
    """Add the empty parts to the JobSet spec, in place."""
    for job in spec.get("replicatedJobs") or []:
        job_template = job.setdefault("template", {})
        job_template.setdefault("metadata", {})
        pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
        pod_template.setdefault("metadata", {})
        pod_spec = pod_template.setdefault("spec", {})
        for key in ("initContainers", "containers"):
            for container in pod_spec.get(key) or []:
                container["resources"] = canonical_resources(container.get("resources") or {})
        if isinstance(pod_spec.get("overhead"), dict):
            pod_spec["overhead"] = {k: canonical(v) for k, v in pod_spec["overhead"].items()}
        for volume in pod_spec.get("volumes") or []:
            empty_dir = volume.get("emptyDir")
            if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
                empty_dir["sizeLimit"] = canonical(empty_dir["sizeLimit"])


#: Fields that are Go maps (empty: omitted); other objects are structs (kept as {}).
MAP_FIELDS = frozenset(
    {"labels", "annotations", "nodeSelector", "limits", "requests", "overhead", "matchLabels",
     "volumeAttributes", "data"}
)  # fmt: skip


def omitted_empties(value: Any, field: str = "") -> Any:
    """`value` without the empty lists and empty maps Go leaves out when it writes."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            item = omitted_empties(item, key)
            if isinstance(item, list) and not item:
                continue
            if isinstance(item, dict) and not item and key in MAP_FIELDS:
                continue
            kept[key] = item
        return kept
    if isinstance(value, list):
        return [omitted_empties(item, field) for item in value]
    return value
