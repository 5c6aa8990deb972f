"""One informer per resource, shared by every kind's controller.

controller-runtime's manager keeps one cache per resource and hands each controller a
view of it; so does this module. Jobs have one informer per kind (each kind is its own
resource). Pods, services and each resource jobs own besides them (ConfigMaps,
ServiceAccounts, Roles, RoleBindings, HorizontalPodAutoscalers: the kinds'
`owned_kinds`) have one list+watch each, selected by the operator-name labels of the
kinds that make them (`training.kubeflow.org/operator-name in (tfjob-controller, ...)`);
gang-scheduling group objects, which carry no operator label, one per group kind in
the operator's namespaces; with `--kueue-integration=external`, Kueue's Workloads and
the cluster-scoped objects they name (kueue.py); with the TrainJob controller,
TrainJobs, JobSets and the two kinds of runtimes (trainer_informers.py). With every
CRD installed that is 17 streams for the six v1 kinds and TrainJob, where one
informer per kind and resource took 23 for the six v1 kinds alone.

Every shared cache is indexed by its objects' owning job *and kind*
(`OWNER_INDEX`: `owner_key(kind, job key)`), so one kind's controller reads only its own
jobs' objects (`JobCaches.view`) and a change is routed to that kind's queue alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tfjob.api import constants as c
from tfjob.api.kinds import OwnedKind
from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.core.plan import GroupKind
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.informer import Informer, object_key
from tfjob.runtimes.kubernetes.cache.kueue import KueueInformers
from tfjob.runtimes.kubernetes.cache.owner_index import OWNER_INDEX, owner_key
from tfjob.runtimes.kubernetes.cache.trainer_informers import TrainJobInformers
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import (
    POD_PROTO_CODEC,
    SERVICE_CODEC,
    CachedJob,
    JobDecoder,
    owned_codec,
)
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    Resource,
    jobs_of,
    resource_of,
)

Owned = Pod | Service | OwnedObject


def group_resource(kind: GroupKind) -> Resource:
    return Resource(kind.group, kind.version, kind.plural)


def operator_selector(kinds: Iterable[Framework[Any]]) -> str:
    """The label selector of the objects made for any of `kinds`."""
    names = sorted({kind.controller_name for kind in kinds})
    if len(names) == 1:
        return f"{c.LABEL_OPERATOR_NAME}={names[0]}"
    return f"{c.LABEL_OPERATOR_NAME} in ({','.join(names)})"


class Owners:
    """Which served kind's job owns an object: the index of every shared cache.

    The controller ownerReference decides; an object controlled by something else
    (or by a kind not served) is nobody's. Without one, the job-name and operator-name
    labels name the job and its kind, so a job still sees, and never duplicates, a
    labelled object whose ownerReference was lost."""

    def __init__(self, kinds: Sequence[Framework[Any]]) -> None:
        self._by_reference = {(k.api_version, k.kind): k.kind for k in kinds}
        self._by_label = {k.controller_name: k.kind for k in kinds}

    def __call__(self, obj: Owned) -> str | None:
        meta = obj.metadata
        for ref in meta.owner_references:
            if ref.controller:
                kind = self._by_reference.get((ref.api_version, ref.kind))
                return (
                    None if kind is None else owner_key(kind, object_key(meta.namespace, ref.name))
                )
        job = meta.labels.get(c.LABEL_JOB_NAME)
        kind = self._by_label.get(meta.labels.get(c.LABEL_OPERATOR_NAME, ""))
        if not job or kind is None:
            return None
        return owner_key(kind, object_key(meta.namespace, job))


class SharedInformers:
    """The operator's caches: one informer per resource for the kinds it serves."""

    def __init__(
        self,
        client: KubeClient,
        kinds: Sequence[Framework[Any]],
        *,
        namespace: str | None,
        group_kinds: Sequence[GroupKind] = (),
        kueue: bool = False,
        trainjobs: bool = False,
    ) -> None:
        """`kueue`: also the caches of `--kueue-integration=external` (kueue.py);
        `trainjobs`: also those of the TrainJob controller (trainer_informers.py)."""
        self.kinds = list(kinds)
        self.owners = Owners(kinds)
        self.jobs: dict[str, Informer[CachedJob]] = {
            kind.kind: Informer(
                client, jobs_of(kind), JobDecoder(kind.job_type).codec, namespace=namespace
            )
            for kind in kinds
        }
        selector = operator_selector(kinds)
        self.pods: Informer[Pod] = Informer(
            client, PODS, POD_PROTO_CODEC, namespace=namespace, label_selector=selector
        )
        self.services: Informer[Service] = Informer(
            client,
            SERVICES,
            SERVICE_CODEC,
            namespace=namespace,
            label_selector=selector,
            metadata_only=True,  # the core reads only a service's metadata
        )
        self.owned: dict[Resource, Informer[OwnedObject]] = {}
        for resource, (owned, owners) in _owned_resources(kinds).items():
            self.owned[resource] = Informer(
                client,
                resource,
                owned_codec(owned.api_version, owned.kind),
                namespace=namespace,
                label_selector=operator_selector(owners),
            )
        # Group objects are read whole, status included (Volcano's phase admits pods).
        self.groups: dict[Resource, Informer[OwnedObject]] = {
            group_resource(kind): Informer(
                client,
                group_resource(kind),
                owned_codec(kind.api_version, kind.kind, with_status=True),
                namespace=namespace,
            )
            for kind in group_kinds
        }
        self.kueue = KueueInformers(client, namespace=namespace) if kueue else None
        self.trainjobs = TrainJobInformers(client, namespace=namespace) if trainjobs else None
        for informer in self.owned_informers():
            informer.add_index(OWNER_INDEX, self.owners)

    def owned_informers(self) -> list[Informer[Any]]:
        """Every cache of objects the v1 kinds' jobs own (all but the jobs'), indexed by
        owner: a change of one queues its job. None without a v1 kind served."""
        if not self.kinds:
            return []
        workloads = [self.kueue.workloads] if self.kueue else []
        return [self.pods, self.services, *self.owned.values(), *self.groups.values(), *workloads]

    def informers(self) -> list[Informer[Any]]:
        """Every cache, those of the jobs' objects first (a job's first reconcile wants
        them synced; they are all synced before any reconcile anyway)."""
        cluster = self.kueue.cluster_informers() if self.kueue and self.kinds else []
        trainer = self.trainjobs.informers() if self.trainjobs else []
        return [*self.owned_informers(), *cluster, *self.jobs.values(), *trainer]


def _owned_resources(
    kinds: Sequence[Framework[Any]],
) -> dict[Resource, tuple[OwnedKind, list[Framework[Any]]]]:
    """Each resource the kinds own, with one declaration of it and the kinds owning it."""
    found: dict[Resource, tuple[OwnedKind, list[Framework[Any]]]] = {}
    for kind in kinds:
        for owned in kind.owned_kinds:
            entry = found.setdefault(resource_of(owned), (owned, []))
            entry[1].append(kind)
    return found
