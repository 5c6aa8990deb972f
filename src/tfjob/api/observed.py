"""Slim projections of the Kubernetes objects the decision core observes.

Both runtimes describe what exists in these shapes: the Kubernetes runtime decodes pods
and services from the API server's JSON straight into them (msgspec skips every field
not named here, which keeps the informer cache small), and the local runtime builds
them from its processes, the way a kubelet reports pod status. The field names follow
the Kubernetes wire format, so a projection is a faithful subset of a real Pod.

The operator caches one of these per pod and service it owns (80,000 at 10,000 jobs
of 4 workers), so they are kept small: only fields something reads (no
creationTimestamp), tuples for the lists (an absent list is the one shared empty
tuple, where an empty list default is a new 56-byte list per object), and no garbage
collector tracking (`gc=False`: decoded data holds no reference cycles, and the
collector never has to walk the cache).
"""

from __future__ import annotations

import msgspec

from tfjob.api.wire import Wire


class Observed(Wire, gc=False):
    """Base of the projections: untracked by the garbage collector (no cycles)."""


class OwnerReference(Observed):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class Meta(Observed):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    owner_references: tuple[OwnerReference, ...] = ()

    def controller_uid(self) -> str | None:
        """UID of the controlling owner, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref.uid
        return None


class Terminated(Observed):
    exit_code: int = 0
    reason: str = ""
    message: str = ""


class Waiting(Observed):
    reason: str = ""
    message: str = ""


class ContainerState(Observed):
    terminated: Terminated | None = None
    waiting: Waiting | None = None


class ContainerStatus(Observed):
    name: str = ""
    restart_count: int = 0
    state: ContainerState = msgspec.field(default_factory=ContainerState)


class PodStatus(Observed):
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    container_statuses: tuple[ContainerStatus, ...] = ()
    init_container_statuses: tuple[ContainerStatus, ...] = ()


class Pod(Observed):
    metadata: Meta = msgspec.field(default_factory=Meta)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    def container_status(self, name: str) -> ContainerStatus | None:
        """The status of the container called `name` (a kind's training container:
        `tensorflow`, `pytorch`, ...), if it has one yet."""
        for status in self.status.container_statuses:
            if status.name == name:
                return status
        return None


class Service(Observed):
    metadata: Meta = msgspec.field(default_factory=Meta)
