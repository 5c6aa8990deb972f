"""The owner reference every object a job creates carries (pods, services, groups).

A controller reference with blockOwnerDeletion: the garbage collector deletes the
objects with their TFJob, and the operator finds its objects by it.
"""

from __future__ import annotations

from typing import Any

from tfjob.api import constants as c
from tfjob.api.types import TFJob


def owner_reference(job: TFJob) -> dict[str, Any]:
    """The job as the controlling owner, in the wire shape of metadata.ownerReferences."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
