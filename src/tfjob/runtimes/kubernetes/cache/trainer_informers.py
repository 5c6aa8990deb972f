"""The TrainJob controller's informers, in the shared caches (shared.py).

- TrainJobs: one informer, every TrainJob (in `--namespace`), indexed by the runtime
  each names (`RUNTIME_INDEX`), so a runtime's change queues the TrainJobs using it;
- JobSets: one informer of every JobSet, indexed by the TrainJob that controls it
  (its controller ownerReference: Trainer puts no label of its own on a JobSet, so
  no selector can narrow the list); each kept as metadata, `spec.suspend` and
  status only (transport/trainer_decode.py);
- TrainingRuntimes and ClusterTrainingRuntimes: one informer each, kept whole (few,
  and the snapshot needs them whole).
What is not cached, and why: trainjobs.py.
"""

from __future__ import annotations

from typing import Any

from tfjob.api import trainjob as tj
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob
from tfjob.runtimes.kubernetes.cache.informer import Informer, key_of, object_key
from tfjob.runtimes.kubernetes.cache.owner_index import OWNER_INDEX, owner_key
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.resources import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from tfjob.runtimes.kubernetes.transport.trainer_decode import (
    JOBSET_CODEC,
    TRAINJOB_CODEC,
    CachedJobSet,
    runtime_codec,
)

RUNTIME_INDEX = "runtime"  # TrainJobs by runtime_key of the runtime they name


def runtime_key(kind: str, namespace: str, name: str) -> str:
    """A runtime's index value: `TrainingRuntime/ns/name`, `ClusterTrainingRuntime//name`."""
    return f"{kind}/{object_key(namespace, name)}"


def runtime_of(trainjob: TrainJob) -> str | None:
    """The runtime_key of the runtime a TrainJob names; None for a kind that is no
    runtime (the core fails it)."""
    ref = trainjob.spec.runtime_ref
    if ref.group_or_default != tj.GROUP:
        return None
    if ref.kind_or_default == tj.TRAINING_RUNTIME:
        return runtime_key(tj.TRAINING_RUNTIME, trainjob.metadata.namespace, ref.name)
    if ref.kind_or_default == tj.CLUSTER_TRAINING_RUNTIME:
        return runtime_key(tj.CLUSTER_TRAINING_RUNTIME, "", ref.name)
    return None


def trainjob_owner(obj: CachedJobSet) -> str | None:
    """The owner index of a JobSet: the TrainJob its controller ownerReference names."""
    for ref in obj.metadata.owner_references:
        if ref.controller:
            if ref.api_version == tj.API_VERSION and ref.kind == tj.KIND:
                return owner_key(tj.KIND, object_key(obj.metadata.namespace, ref.name))
            return None
    return None


class TrainJobInformers:
    """The four informers the TrainJob controller adds to the shared caches."""

    def __init__(self, client: KubeClient, *, namespace: str | None) -> None:
        self.trainjobs: Informer[TrainJob] = Informer(
            client, TRAINJOBS, TRAINJOB_CODEC, namespace=namespace
        )
        self.jobsets: Informer[CachedJobSet] = Informer(
            client, JOBSETS, JOBSET_CODEC, namespace=namespace
        )
        self.runtimes: Informer[TrainingRuntime] = Informer(
            client, TRAINING_RUNTIMES, runtime_codec(tj.TRAINING_RUNTIME), namespace=namespace
        )
        # Cluster-scoped: listed whole even when the operator watches one namespace.
        self.cluster_runtimes: Informer[TrainingRuntime] = Informer(
            client, CLUSTER_TRAINING_RUNTIMES, runtime_codec(tj.CLUSTER_TRAINING_RUNTIME)
        )
        self.trainjobs.add_index(RUNTIME_INDEX, runtime_of)
        self.jobsets.add_index(OWNER_INDEX, trainjob_owner)

    def informers(self) -> list[Informer[Any]]:
        """The owned objects' and runtimes' caches first, the TrainJobs' last."""
        return [self.jobsets, self.runtimes, self.cluster_runtimes, self.trainjobs]

    def runtime(self, trainjob: TrainJob) -> TrainingRuntime | None:
        """The runtime the TrainJob names, as cached; None if there is none."""
        ref = trainjob.spec.runtime_ref
        if ref.kind_or_default == tj.TRAINING_RUNTIME:
            return self.runtimes.get(object_key(trainjob.metadata.namespace, ref.name))
        if ref.kind_or_default == tj.CLUSTER_TRAINING_RUNTIME:
            return self.cluster_runtimes.get(object_key("", ref.name))
        return None

    def users(self, kind: str, runtime: TrainingRuntime) -> list[str]:
        """The keys of the TrainJobs that name this runtime."""
        key = runtime_key(kind, runtime.metadata.namespace, runtime.metadata.name)
        return [key_of(t) for t in self.trainjobs.by_index(RUNTIME_INDEX, key)]
