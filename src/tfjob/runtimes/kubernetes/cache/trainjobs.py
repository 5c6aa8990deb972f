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

    def wrote(self, resource: Resource, resource_version: str) -> None:
        """Note a write of ours and the resourceVersion the API server returned."""
        seen = self.written.get(resource)
        if resource_version and (seen is None or is_newer(resource_version, seen)):
            self.written[resource] = resource_version


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

    def view(self, key: str) -> TrainJobView | Held | None:
        """The TrainJob `key` with its JobSet; `Held` while the caches lag behind our
        last writes for it; None once it is gone."""
        held = self.holds.held(key)
        if held is not None:
            return held
        trainjob = self.informers.trainjobs.get(key)
        if trainjob is None:
            self.holds.forget(key)
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
        return TrainJobView(key, trainjob, jobset)

    def hold(self, view: TrainJobView) -> None:
        self.holds.hold(view.key, view.written)
