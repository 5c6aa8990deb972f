"""The shell's one consistency rule: read the caches, and after our own writes wait for them.

Reconciles read a job, its pods and its services from the informers' caches only
(`JobCaches.view`). A cache lags behind our own writes: right after creating a pod,
deleting one or writing a status, the next reconcile could decide from a view that
does not show it yet. So every write of ours is noted with the resourceVersion the
API server returned (`JobView.wrote`), and once the reconcile ends (`JobCaches.hold`)
the job is held: `view` answers `Held` until each cache's watch has reached the
highest resourceVersion written to it, or HOLD_SECONDS have passed (a lost event must
not stop a job for good). The watch event that catches a cache up queues the job, so
a held job comes back as soon as its view is whole.

etcd's revision is one counter for every resource, and a watch delivers a resource's
changes in its order: a cache whose watch has reached revision R holds every change
of its resource up to R, ours included.

Why this is enough: what the hold cannot cover (an expired hold, a request that timed
out with an unknown result, another writer) is made harmless by rules that need no
cache at all - fixed object names (a second create is AlreadyExists, which counts as
done), the UIDs of counted failures in `status.countedPods`, and conditional status
writes. docs/consistency.md lists every rule with what it guards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfjob.api import constants as c
from tfjob.api.kinds import KindDeclaration, OwnedKind
from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.runtimes.kubernetes.cache.informer import Informer, is_newer, object_key
from tfjob.runtimes.kubernetes.transport.decode import CachedJob
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    Resource,
    jobs_of,
    resource_of,
)

HOLD_SECONDS = 15.0
JOB_INDEX = "job"  # the pods and services caches' index by owning job key


def owning_job(obj: Pod | Service | OwnedObject, kind: KindDeclaration) -> str | None:
    """`namespace/name` of the job of `kind` a pod, service or other owned object
    belongs to.

    The controller ownerReference decides; an object controlled by something else is
    not ours. Without one, the job-name label names the job (so a job still sees, and
    never duplicates, a labelled object whose ownerReference was lost; the caches hold
    only objects labelled with the kind's operator name).
    """
    meta = obj.metadata
    for ref in meta.owner_references:
        if ref.controller:
            if ref.kind == kind.kind and ref.api_version == kind.api_version:
                return object_key(meta.namespace, ref.name)
            return None
    label = meta.labels.get(c.LABEL_JOB_NAME)
    return object_key(meta.namespace, label) if label else None


@dataclass
class JobView:
    """One job as the caches show it, and the writes a reconcile makes from it."""

    key: str
    job: CachedJob
    pods: list[Pod]
    services: list[Service]
    # The other objects the job owns (its kind's `owned_kinds`), every kind together.
    owned: list[OwnedObject] = field(default_factory=list)
    written: dict[Resource, str] = field(default_factory=dict)

    def wrote(self, resource: Resource, resource_version: str) -> None:
        """Note a write of ours and the resourceVersion the API server returned."""
        seen = self.written.get(resource)
        if resource_version and (seen is None or is_newer(resource_version, seen)):
            self.written[resource] = resource_version


@dataclass(frozen=True)
class Held:
    """The caches do not show this job's last writes yet: look again within `seconds`."""

    seconds: float


@dataclass
class _Hold:
    until: float
    versions: dict[Resource, str]


class JobCaches:
    """One kind's jobs, pods and services caches (and, for a kind that owns other
    objects, one cache per kind of them), read one job at a time."""

    def __init__(
        self,
        kind: KindDeclaration,
        jobs: Informer[CachedJob],
        pods: Informer[Pod],
        services: Informer[Service],
        *,
        owned: dict[OwnedKind, Informer[OwnedObject]] | None = None,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self.jobs = jobs
        self.pods = pods
        self.services = services
        self.owned = dict(owned or {})
        pods.add_index(JOB_INDEX, self.owning_job)
        services.add_index(JOB_INDEX, self.owning_job)
        for informer in self.owned.values():
            informer.add_index(JOB_INDEX, self.owning_job)
        self._informers: dict[Resource, Informer[Any]]
        self._informers = {jobs_of(kind): jobs, PODS: pods, SERVICES: services}
        self._informers |= {resource_of(k): i for k, i in self.owned.items()}
        self.hold_seconds = hold_seconds  # the longest a job is held
        self._clock = clock
        self._holds: dict[str, _Hold] = {}

    def owning_job(self, obj: Pod | Service | OwnedObject) -> str | None:
        """The key of this kind's job that owns `obj` (`owning_job`)."""
        return owning_job(obj, self.kind)

    def view(self, key: str) -> JobView | Held | None:
        """The job `key` with its pods and services; `Held` while the caches lag
        behind our last writes for it; None once the job is gone."""
        hold = self._holds.get(key)
        if hold is not None:
            left = hold.until - self._clock()
            if left > 0 and not self._caught_up(hold):
                return Held(left)
            del self._holds[key]
        job = self.jobs.get(key)
        if job is None:
            self._holds.pop(key, None)
            return None
        return JobView(
            key,
            job,
            self.pods.by_index(JOB_INDEX, key),
            self.services.by_index(JOB_INDEX, key),
            [obj for informer in self.owned.values() for obj in informer.by_index(JOB_INDEX, key)],
        )

    def hold(self, view: JobView) -> None:
        """Hold the job until the caches show what this reconcile wrote."""
        if view.written:
            until = self._clock() + self.hold_seconds
            self._holds[view.key] = _Hold(until, dict(view.written))

    def _caught_up(self, hold: _Hold) -> bool:
        return all(
            not is_newer(version, self._informers[resource].resource_version)
            for resource, version in hold.versions.items()
        )
