"""The owner reference every object a job creates carries (pods, services, groups).

A controller reference with blockOwnerDeletion: the garbage collector deletes the
objects with their job, and the operator finds its objects by it.
"""

from __future__ import annotations

from typing import Any

from tfjob.api.kinds import KindDeclaration
from tfjob.api.types import Job


def owner_reference(job: Job, kind: KindDeclaration) -> dict[str, Any]:
    """The job as the controlling owner, in the wire shape of metadata.ownerReferences."""
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
