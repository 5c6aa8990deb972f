"""Which of a TrainJob's side objects a pass reads: the shell observes only these.

A cluster holds many ConfigMaps that are not ours, and the operator may not read
Secrets at all, so the shell keeps no cache of either: it reads by name what a pass
will look at (`reads`), and nothing for a TrainJob whose objects no pass makes any
more (Complete, or failed past its deadline), or that another controller manages.
The MPI Secret is never read: the shell knows it exists once it made it or was
told it exists (Observed.mpi_secret).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tfjob.api import trainjob as tj
from tfjob.api.kinds import OwnedKind
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob
from tfjob.core.trainjob.podgroup import kind_of
from tfjob.core.trainjob.snapshot import CONFIGMAP, snapshot_name
from tfjob.frameworks.mlpolicy.mpi import HOSTFILE_SUFFIX


@dataclass(frozen=True)
class Read:
    """One object to read by name, and the `Observed` field it fills."""

    kind: OwnedKind
    name: str
    field: str


def snapshot_read(trainjob: TrainJob) -> Read | None:
    """The runtime snapshot, read first (the runtime it holds decides the rest); None
    when no pass of this TrainJob makes objects any more."""
    if not trainjob.spec.managed_by_us or _done(trainjob):
        return None
    return Read(CONFIGMAP, snapshot_name(trainjob), "snapshot")


def reads(trainjob: TrainJob, runtimes: Sequence[TrainingRuntime]) -> list[Read]:
    """The side objects to read after the snapshot, for the runtimes the pass may build
    from (the live one, the snapshot's): an MPI runtime's hostfile, a podGroupPolicy's
    PodGroup."""
    if snapshot_read(trainjob) is None:
        return []
    name = trainjob.metadata.name
    wanted: dict[str, Read] = {}
    for runtime in runtimes:
        policy = runtime.spec.ml_policy
        if policy is not None and policy.mpi is not None:
            wanted["mpi_hostfile"] = Read(CONFIGMAP, f"{name}{HOSTFILE_SUFFIX}", "mpi_hostfile")
        group = kind_of(runtime.spec.pod_group_policy)
        if group is not None:
            wanted["pod_group"] = Read(group, name, "pod_group")
    return list(wanted.values())


def _done(trainjob: TrainJob) -> bool:
    """As reconcile.py: a Complete TrainJob, or one failed past its deadline, gets no
    objects again (any other Failed is derived again each pass)."""
    status = trainjob.status
    failed = status.condition(tj.FAILED)
    past_deadline = (
        failed is not None
        and failed.status == "True"
        and failed.reason == tj.REASON_DEADLINE_EXCEEDED
    )
    return status.is_true(tj.COMPLETE) or past_deadline
