"""The caches of `--kueue-integration=external`: what a queued job's pass reads of Kueue.

With tfjob as the job framework of its kinds (core/queued.py), a reconcile of a queued
job reads its Workloads, the ResourceFlavors their admissions name, and the priority
class its Workload is made with. Each is one more informer beside shared.py's, built
only in external mode (in builtin mode nothing here is listed or watched):
- Workloads (kueue.x-k8s.io/v1beta2), in the operator's namespaces, whole with their
  status. They carry no operator-name label (Kueue's jobframework copies only the
  job's labels it is told to), so, like gang groups, they are all listed and indexed
  by their controller ownerReference (shared.py `Owners`); a change queues its job;
- ResourceFlavors, WorkloadPriorityClasses (kueue.x-k8s.io/v1beta2) and
  PriorityClasses (scheduling.k8s.io/v1): cluster-scoped, few, kept whole. A change
  queues nothing: a job waiting for a flavor or a class looks again on its own
  (core/queued.py `FLAVOR_RECHECK_SECONDS`, `PRIORITY_RECHECK_SECONDS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tfjob.api.observed import OwnedObject
from tfjob.core.queued import WORKLOAD, PriorityNotFound
from tfjob.core.queueing import POD_PRIORITY_CLASS, Priority, PriorityClass
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import owned_codec
from tfjob.runtimes.kubernetes.transport.resources import Resource

KUEUE_GROUP: Final = WORKLOAD.group
WORKLOADS: Final = Resource(KUEUE_GROUP, WORKLOAD.version, WORKLOAD.plural)
RESOURCE_FLAVORS: Final = Resource(KUEUE_GROUP, "v1beta2", "resourceflavors")
WORKLOAD_PRIORITY_CLASSES: Final = Resource(KUEUE_GROUP, "v1beta2", "workloadpriorityclasses")
PRIORITY_CLASSES: Final = Resource("scheduling.k8s.io", "v1", "priorityclasses")


def _cluster_wide(client: KubeClient, resource: Resource, kind: str) -> Informer[OwnedObject]:
    api_version = f"{resource.group}/{resource.version}"
    return Informer(client, resource, owned_codec(api_version, kind), namespace=None)


class KueueInformers:
    """The Workloads of the operator's jobs and the cluster-scoped objects they name."""

    def __init__(self, client: KubeClient, *, namespace: str | None) -> None:
        self.workloads: Informer[OwnedObject] = Informer(
            client,
            WORKLOADS,
            owned_codec(WORKLOAD.api_version, WORKLOAD.kind, with_status=True),
            namespace=namespace,
        )
        self.flavors = _cluster_wide(client, RESOURCE_FLAVORS, "ResourceFlavor")
        self.workload_priorities = _cluster_wide(
            client, WORKLOAD_PRIORITY_CLASSES, "WorkloadPriorityClass"
        )
        self.pod_priorities = _cluster_wide(client, PRIORITY_CLASSES, "PriorityClass")

    def cluster_informers(self) -> list[Informer[OwnedObject]]:
        """The caches whose changes queue no job."""
        return [self.flavors, self.workload_priorities, self.pod_priorities]

    def flavors_by_name(self) -> dict[str, Mapping[str, Any]]:
        """Every ResourceFlavor, by name (as `reconcile(flavors=...)` takes them)."""
        return {f.metadata.name: f.document for f in self.flavors.items()}

    def resolve(self, wanted: PriorityClass | None) -> Priority | PriorityNotFound | None:
        """The priority `wanted` names (`queued.priority_to_resolve`), as Kueue looks it
        up: the class of that name and its value; with no name, the PriorityClass with
        globalDefault of least value, or None (priority 0) when there is none."""
        if wanted is None:
            return None
        if not wanted.name:
            return _global_default(self.pod_priorities.items())
        cache = (
            self.pod_priorities if wanted.source == POD_PRIORITY_CLASS else self.workload_priorities
        )
        found = next((c for c in cache.items() if c.metadata.name == wanted.name), None)
        if found is None:
            return PriorityNotFound(wanted)
        return Priority(wanted.source, wanted.name, _value(found))


def _global_default(classes: list[OwnedObject]) -> Priority | None:
    defaults = [c for c in classes if c.document.get("globalDefault")]
    if not defaults:
        return None
    least = min(defaults, key=_value)
    return Priority(POD_PRIORITY_CLASS, least.metadata.name, _value(least))


def _value(priority_class: OwnedObject) -> int:
    return int(priority_class.document.get("value") or 0)
