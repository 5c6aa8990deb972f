"""The shell's one consistency rule: read the caches, and after our own writes wait for them.

Reconciles read a job, its pods, its services, the other objects it owns and its
gang groups from the shared informers' caches only (`JobCaches.view`, one kind's view
of shared.py's caches). A cache lags behind our own writes: right after creating a pod,
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

from tfjob.api.kinds import KindDeclaration
from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.api.types import Job
from tfjob.core.queueing import prebuilt_workload_name
from tfjob.runtimes.kubernetes.cache.informer import Informer, is_newer, object_key
from tfjob.runtimes.kubernetes.cache.owner_index import OWNER_INDEX, owner_key
from tfjob.runtimes.kubernetes.cache.shared import SharedInformers
from tfjob.runtimes.kubernetes.transport.decode import CachedJob
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    Resource,
    jobs_of,
    resource_of,
)

HOLD_SECONDS = 15.0


@dataclass
class JobView:
    """One job as the caches show it, and the writes a reconcile makes from it."""

    key: str
    job: CachedJob
    pods: list[Pod]
    services: list[Service]
    # The other objects the job owns (its kind's `owned_kinds`), every kind together.
    owned: list[OwnedObject] = field(default_factory=list)
    # Its gang-scheduling group objects, whole (status included), as the core reads them.
    groups: list[dict[str, Any]] = field(default_factory=list)
    # Its Kueue Workloads, whole (status included): --kueue-integration=external only.
    workloads: list[OwnedObject] = field(default_factory=list)
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


class Holds:
    """The hold itself, for any controller's view: which keys wait for which caches to
    reach the resourceVersions written for them (the module docstring's rule).

    A write to a resource with no cache here (a TrainJob's ConfigMaps, read by name
    each pass: cache/trainjobs.py) holds nothing: what is read fresh cannot lag."""

    def __init__(
        self,
        informers: dict[Resource, Informer[Any]],
        hold_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._informers = informers
        self.hold_seconds = hold_seconds  # the longest a key is held
        self._clock = clock
        self._holds: dict[str, _Hold] = {}

    def held(self, key: str) -> Held | None:
        """`Held` while the caches lag behind the last writes for `key`."""
        hold = self._holds.get(key)
        if hold is None:
            return None
        left = hold.until - self._clock()
        if left > 0 and not self._caught_up(hold):
            return Held(left)
        del self._holds[key]
        return None

    def hold(self, key: str, written: dict[Resource, str]) -> None:
        """Hold `key` until the caches show `written` (resource: resourceVersion)."""
        versions = {r: v for r, v in written.items() if r in self._informers}
        if versions:
            self._holds[key] = _Hold(self._clock() + self.hold_seconds, versions)

    def forget(self, key: str) -> None:
        self._holds.pop(key, None)

    def _caught_up(self, hold: _Hold) -> bool:
        return all(
            not is_newer(version, self._informers[resource].resource_version)
            for resource, version in hold.versions.items()
        )


class JobCaches:
    """One kind's view of the shared caches (shared.py), read one job at a time: its
    jobs' cache, and in the caches every kind shares, its jobs' objects only."""

    def __init__(
        self,
        kind: KindDeclaration,
        shared: SharedInformers,
        *,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self.jobs: Informer[CachedJob] = shared.jobs[kind.kind]
        self.pods: Informer[Pod] = shared.pods
        self.services: Informer[Service] = shared.services
        self.owned = [shared.owned[resource_of(k)] for k in kind.owned_kinds]
        self.groups = list(shared.groups.values())
        self.kueue = shared.kueue
        self._workloads = [shared.kueue.workloads] if shared.kueue else []
        informers: dict[Resource, Informer[Any]]
        informers = {jobs_of(kind): self.jobs, PODS: self.pods, SERVICES: self.services}
        informers |= {resource_of(k): shared.owned[resource_of(k)] for k in kind.owned_kinds}
        informers |= shared.groups
        informers |= {w.resource: w for w in self._workloads}
        self.holds = Holds(informers, hold_seconds, clock)

    @property
    def hold_seconds(self) -> float:
        """The longest a job is held."""
        return self.holds.hold_seconds

    @hold_seconds.setter
    def hold_seconds(self, seconds: float) -> None:
        self.holds.hold_seconds = seconds

    def view(self, key: str) -> JobView | Held | None:
        """The job `key` with its objects; `Held` while the caches lag behind our last
        writes for it; None once the job is gone."""
        held = self.holds.held(key)
        if held is not None:
            return held
        job = self.jobs.get(key)
        if job is None:
            self.holds.forget(key)
            return None
        owner = owner_key(self.kind.kind, key)
        return JobView(
            key,
            job,
            self.pods.by_index(OWNER_INDEX, owner),
            self.services.by_index(OWNER_INDEX, owner),
            [obj for informer in self.owned for obj in informer.by_index(OWNER_INDEX, owner)],
            [g.document for informer in self.groups for g in informer.by_index(OWNER_INDEX, owner)],
            self._workloads_for(job, key),
        )

    def _workloads_for(self, job: CachedJob, key: str) -> list[OwnedObject]:
        """The Workloads the job controls and, for a MultiKueue worker's copy of a
        job, the prebuilt one it names, found by name: made by the manager's
        MultiKueue with no owner, it is in no owner index until the job takes it."""
        found = self.workloads_of(key)
        name = prebuilt_workload_name(job) if isinstance(job, Job) else None
        if name is None or any(w.metadata.name == name for w in found):
            return found
        wanted = object_key(job.metadata.namespace, name)
        named = [w for informer in self._workloads if (w := informer.get(wanted)) is not None]
        return found + named

    def workloads_of(self, key: str) -> list[OwnedObject]:
        """The Workloads the job `key` controls, or controlled: indexed by their
        ownerReference, they are still found once the job is gone (orphans)."""
        owner = owner_key(self.kind.kind, key)
        return [w for informer in self._workloads for w in informer.by_index(OWNER_INDEX, owner)]

    def hold(self, view: JobView) -> None:
        """Hold the job until the caches show what this reconcile wrote."""
        self.holds.hold(view.key, view.written)
