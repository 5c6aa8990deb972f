"""The shared caches' owner index: which job, of which kind, an object belongs to.

Its own module so that every cache module can index by it (shared.py for the v1
kinds' objects, trainer_informers.py for the JobSets of TrainJobs)."""

from __future__ import annotations

import sys

OWNER_INDEX = "owner"  # the shared caches' index: owner_key(kind, job key) -> objects


def owner_key(kind: str, job: str) -> str:
    """The index value of the objects of job `job` (`namespace/name`) of `kind`."""
    return f"{kind}/{job}"


def split_owner(owner: str) -> tuple[str, str]:
    """(kind, job key) of an `owner_key`; the key interned, as the informer's are
    (informer.py `key_of`): the queue may keep it."""
    kind, _, job = owner.partition("/")
    return kind, sys.intern(job)
