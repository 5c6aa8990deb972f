"""How replica types and generated objects are named, as upstream names them.

These names are part of the API contract: pods, services, labels and TF_CONFIG keys
all use them, and users' tooling looks them up. (A replica type's canonical case is
the kind's: `KindDeclaration.canonical_type`.)
"""

from __future__ import annotations


def replica_key(replica_type: str) -> str:
    """The lower-case form used in names, labels and TF_CONFIG: `Worker` -> `worker`."""
    return replica_type.lower()


def object_name(job_name: str, replica_type: str, index: int) -> str:
    """Pod and service name: `<job>-<type>-<index>` with `/` replaced by `-`."""
    return f"{job_name}-{replica_key(replica_type)}-{index}".replace("/", "-")


def label_value(job_name: str) -> str:
    """The job-name label value (`/` is not allowed in label values)."""
    return job_name.replace("/", "-")
