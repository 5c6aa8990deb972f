"""The Kubernetes resources the operator touches, and their REST paths.

Spelled out once, so the client, the informers and the RBAC manifest agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tfjob.api import constants as c
from tfjob.api.kinds import KindDeclaration, OwnedKind


@dataclass(frozen=True)
class Resource:
    """A namespaced resource: `group` is "" for the core API."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str = "", subresource: str = "") -> str:
        """`/api/v1/namespaces/ns/pods/name/status`; no namespace means all of them."""
        root = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        parts = [root]
        if namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS: Final = Resource("", "v1", "pods")
SERVICES: Final = Resource("", "v1", "services")
EVENTS: Final = Resource("", "v1", "events")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases")
# Kubeflow Trainer's kinds, and the JobSets a TrainJob becomes.
TRAINJOBS: Final = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs")
TRAINING_RUNTIMES: Final = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES: Final = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"
)  # cluster-scoped: listed and read with no namespace
JOBSETS: Final = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets")


def jobs_of(kind: KindDeclaration) -> Resource:
    """The resource of one kind's jobs: `tfjobs.kubeflow.org`, `pytorchjobs.kubeflow.org`."""
    return Resource(kind.group, kind.version, kind.plural)


def owned_by(kind: KindDeclaration) -> str:
    """The label selector of the pods and services made for one kind's jobs (everything
    the operator makes carries its kind's label; informers watch only these)."""
    return f"{c.LABEL_OPERATOR_NAME}={kind.controller_name}"


def resource_of(kind: OwnedKind) -> Resource:
    """The resource of a kind of object jobs own: `configmaps`, `roles.rbac...`."""
    return Resource(kind.group, kind.version, kind.plural)
