"""Slim projections of the Kubernetes objects the decision core observes.

Both runtimes describe what exists in these shapes: the Kubernetes runtime decodes pods
and services from the API server's JSON straight into them (msgspec skips every field
not named here, which keeps the informer cache small), and the local runtime builds
them from its processes, the way a kubelet reports pod status. The field names follow
the Kubernetes wire format, so a projection is a faithful subset of a real Pod.
"""

from __future__ import annotations

import msgspec

from tfjob.api.wire import Wire


class OwnerReference(Wire):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class Meta(Wire):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    owner_references: list[OwnerReference] = []

    def controller_uid(self) -> str | None:
        """UID of the controlling owner, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref.uid
        return None


class Terminated(Wire):
    exit_code: int = 0
    reason: str = ""
    message: str = ""


class Waiting(Wire):
    reason: str = ""
    message: str = ""


class ContainerState(Wire):
    terminated: Terminated | None = None
    waiting: Waiting | None = None


class ContainerStatus(Wire):
    name: str = ""
    restart_count: int = 0
    state: ContainerState = msgspec.field(default_factory=ContainerState)


class PodStatus(Wire):
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    container_statuses: list[ContainerStatus] = []
    init_container_statuses: list[ContainerStatus] = []


class Pod(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class Service(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
