"""How replica types and generated objects are named, as upstream names them.

These names are part of the API contract: pods, services, labels and TF_CONFIG keys
all use them, and users' tooling looks them up.
"""

from __future__ import annotations

from tfjob.api import constants as c

_CANONICAL = {name.lower(): name for name in c.REPLICA_TYPES}


def canonical_type(key: str) -> str | None:
    """The canonical spelling of a replica-type key, or None for an unknown type."""
    return _CANONICAL.get(key.lower())


def replica_key(replica_type: str) -> str:
    """The lower-case form used in names, labels and TF_CONFIG: `Worker` -> `worker`."""
    return replica_type.lower()


def object_name(job_name: str, replica_type: str, index: int) -> str:
    """Pod and service name: `<job>-<type>-<index>` with `/` replaced by `-`."""
    return f"{job_name}-{replica_key(replica_type)}-{index}".replace("/", "-")


def label_value(job_name: str) -> str:
    """The job-name label value (`/` is not allowed in label values)."""
    return job_name.replace("/", "-")


def is_chief_or_master(replica_type: str) -> bool:
    return replica_type in (c.CHIEF, c.MASTER)
