"""What Trainer's round trip of the template through Go's typed structs writes.

Trainer reads the runtime's JobSet spec into typed Go structs and back before it
applies it, so every struct-valued field without `omitempty` effect is written even
when empty: each replicated job's Job template and pod template get `metadata: {}`,
each container and init container `resources: {}`. tfjob writes them too, so the
applied JobSet is the same object.
"""

from __future__ import annotations

from typing import Any


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
                container.setdefault("resources", {})
