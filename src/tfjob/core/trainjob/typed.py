"""What Trainer's round trip of the template through Go's typed structs writes.

Trainer reads the runtime's JobSet spec into typed Go structs and back before it
applies it, so every struct-valued field without `omitempty` effect is written even
when empty: each replicated job's Job template and pod template get `metadata: {}`,
each container and init container `resources: {}`; and every quantity is written
in Go's canonical form (`1000m` as `1`, a number as a string). tfjob writes the
same, so the applied JobSet is the same object.
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
