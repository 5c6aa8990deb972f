"""The TrainJob controller's view of one TrainJob, held after our own writes.

How each object a TrainJob pass reads is observed (docs/consistency.md, decision 0032):
- the TrainJob, its JobSet and the runtimes: from the shared caches
  (trainer_informers.py);
- the runtime snapshot and MPI hostfile ConfigMaps, and a PodGroup: read by name
  when a pass needs them (core/trainjob/reads.py), never cached: a cluster has many
  ConfigMaps that are not ours and Trainer labels none of its own;
- the MPI Secret: never read (the operator may only create Secrets); the reconciler
  notes the ones it made or found made.
The hold after our own writes (consistency.py) covers the cached resources: the
TrainJob (its status) and its JobSet.

A TrainJob the watch shows created after the caches synced (`created`) has no
objects but those this process makes: its first pass reads no snapshot (none can
exist: the leader's caches start after it took the Lease, so a TrainJob another
operator made objects for is listed at start, not watched being created).

The watch event of our own write (the TrainJob at the version our status write
returned, the JobSet at the version our apply returned) queues no pass (`ours`):
it shows what the pass that wrote it decided from plus that write, so a pass would
find nothing new (another change comes with its own event), and each was a GET of
the snapshot for nothing. Except while a pass of the TrainJob waits for the caches
(`Held`): that event is what ends the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfjob.api import trainjob as tj
from tfjob.api.trainjob import TrainJob
from tfjob.runtimes.kubernetes.cache.consistency import HOLD_SECONDS, Held, Holds
from tfjob.runtimes.kubernetes.cache.informer import Informer, is_newer
from tfjob.runtimes.kubernetes.cache.owner_index import OWNER_INDEX, owner_key
from tfjob.runtimes.kubernetes.cache.trainer_informers import TrainJobInformers
from tfjob.runtimes.kubernetes.transport.resources import JOBSETS, TRAINJOBS, Resource


@dataclass
class TrainJobView:
    """One TrainJob as the caches show it, and the writes a reconcile makes from it."""

    key: str
    trainjob: TrainJob
    jobset: dict[str, Any] | None
    written: dict[Resource, str] = field(default_factory=dict)
    noted: Callable[[str, Resource, str], None] = lambda _key, _resource, _version: None

    def wrote(self, resource: Resource, resource_version: str) -> None:
        """Note a write of ours and the resourceVersion the API server returned."""
        seen = self.written.get(resource)
        if resource_version and (seen is None or is_newer(resource_version, seen)):
            self.written[resource] = resource_version
            self.noted(self.key, resource, resource_version)


class TrainJobCaches:
    """The TrainJob controller's view of the caches, one TrainJob at a time, held
    after our own writes as every kind's view is (consistency.py)."""

    def __init__(
        self,
        informers: TrainJobInformers,
        *,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.informers = informers
        cached: dict[Resource, Informer[Any]] = {
            TRAINJOBS: informers.trainjobs,
            JOBSETS: informers.jobsets,
        }
        self.holds = Holds(cached, hold_seconds, clock)
        self._ours: dict[str, dict[Resource, str]] = {}  # key -> our last write's version
        self._waiting: set[str] = set()  # keys whose last pass found them held
        self._new: dict[str, str] = {}  # key -> uid: created since the caches synced

    def view(self, key: str) -> TrainJobView | Held | None:
        """The TrainJob `key` with its JobSet; `Held` while the caches lag behind our
        last writes for it; None once it is gone."""
        held = self.holds.held(key)
        if held is not None:
            self._waiting.add(key)
            return held
        self._waiting.discard(key)
        trainjob = self.informers.trainjobs.get(key)
        if trainjob is None:
            self.holds.forget(key)
            self._ours.pop(key, None)
            self._new.pop(key, None)
            return None
        owned = self.informers.jobsets.by_index(OWNER_INDEX, owner_key(tj.KIND, key))
        meta = trainjob.metadata
        jobset = next(
            (
                j.document
                for j in owned
                if j.metadata.name == meta.name and j.metadata.controller_uid() == meta.uid
            ),
            None,
        )  # a JobSet of an earlier TrainJob of this name (being collected) is not its
        return TrainJobView(key, trainjob, jobset, noted=self._noted)

    def hold(self, view: TrainJobView) -> None:
        self.holds.hold(view.key, view.written)

    def ours(self, key: str, resource: Resource, resource_version: str) -> bool:
        """Whether an event of TrainJob `key`'s object in `resource` shows our own last
        write to it and nothing else, while no pass of `key` waits for it."""
        if not resource_version or key in self._waiting:
            return False
        written = self._ours.get(key)
        if written is None or written.get(resource) != resource_version:
            return False
        # That write's event comes once: forget it, and the hold once every write's
        # event came (a finished TrainJob sees no pass to drop either). Asking `held`
        # would not do: the informer counts the event's version as seen only after
        # its handlers ran, so the hold stayed until the TrainJob's next pass.
        del written[resource]
        if not written:
            del self._ours[key]
            self.holds.forget(key)
        return True

    def created(self, key: str, uid: str) -> None:
        """Note a TrainJob the watch shows created after the caches synced: nothing
        of it can exist yet but what this process makes (`first_pass`)."""
        self._new[key] = uid

    def first_pass(self, key: str, uid: str) -> bool:
        """Whether this is the first pass of a TrainJob created since the caches
        synced (once: a later pass is not, whatever this one does)."""
        return self._new.pop(key, None) == uid

    def waiting(self, key: str) -> bool:
        """Whether the last pass of `key` found it held: any event of its objects may
        be the one that ends the hold."""
        return key in self._waiting

    def _noted(self, key: str, resource: Resource, resource_version: str) -> None:
        if resource in (TRAINJOBS, JOBSETS):
            self._ours.setdefault(key, {})[resource] = resource_version
