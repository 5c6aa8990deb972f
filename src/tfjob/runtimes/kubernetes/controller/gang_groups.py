"""Gang scheduling on Kubernetes: the group API must be served.

The core decides (tfjob.core.gang, reconcile); the group objects are read from shared
caches (one informer per group kind: cache/shared.py), so a Volcano PodGroup leaving
Pending queues its job at once, and written through the one write path (writes.py):
a create or delete with the same Events as pods, an update a conditional PUT with
none (upstream records none for it). What is left here runs at start-up: the group
API must be served (the CRD installed, or for native Kubernetes the alpha API
enabled), else the operator exits, as upstream does.
"""

from __future__ import annotations

from tfjob.api.errors import PermanentError
from tfjob.core import gang
from tfjob.core.plan import GroupKind
from tfjob.runtimes.kubernetes.cache.shared import group_resource
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient


class GangUnavailable(PermanentError):
    """The gang scheduler's group API is not served by this cluster."""


class GangGroups:
    """The group kinds of one operator's gang scheduling (`scheduler_name` not empty)."""

    def __init__(self, client: KubeClient, scheduler_name: str) -> None:
        self._client = client
        self.kinds = gang.group_kinds(scheduler_name)
        self.scheduler_name = scheduler_name

    async def check_served(self, namespace: str | None) -> None:
        """Raise GangUnavailable naming the missing API and the fix."""
        for kind in self.kinds:
            try:
                await self._client.list(group_resource(kind), namespace, limit=1)
            except ApiError as error:
                if error.not_found:
                    raise GangUnavailable(
                        f"--gang-scheduler-name {self.scheduler_name} needs {kind.kind} "
                        f"({kind.api_version}), which this cluster does not serve: " + _fix(kind)
                    ) from error
                raise


def _fix(kind: GroupKind) -> str:
    if kind.group == "scheduling.k8s.io":
        return (
            "run kube-apiserver 1.36+ with --runtime-config=scheduling.k8s.io/v1alpha2=true "
            "and --feature-gates=GenericWorkload=true,GangScheduling=true"
        )
    return f"install the {kind.plural}.{kind.group} CustomResourceDefinition (the scheduler's)"
