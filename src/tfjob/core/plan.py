"""What the decision core tells a runtime to do: the output of one reconcile.

A plan is data. Runtimes carry out its actions (in order), record its events, write
its status if it changed, and come back after `requeue_after` seconds. The core never
performs any of it, which is what lets one core drive both Kubernetes and local
processes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.kinds import OwnedKind
from tfjob.api.types import JobStatus, ReplicaSpec
from tfjob.core.conditions import is_finished


class CreatePod(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create the pod of this replica.

    The action names the replica only; its manifest is rendered by the runtime as it
    creates the pod (`tfjob.core.objects.PodRenderer`, from the job the plan was made
    from). Every pod of a distributed job carries the whole cluster in TF_CONFIG, so a
    plan holding all manifests of a 1,000-replica job would hold ~45 MB at once.
    """

    replica_type: str  # canonical, e.g. "Worker"
    index: int
    name: str


class DeletePod(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Delete the pod of this name (a no-op if it is already gone), only if it is
    still the pod of this uid: the one the plan saw (a replacement made under the same
    name since is left alone). Empty: whatever pod has the name."""

    replica_type: str
    name: str
    uid: str = ""


class CreateService(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create this headless service (a full Service manifest)."""

    replica_type: str
    index: int
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


class DeleteService(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Delete the service of this name (a no-op if it is already gone)."""

    replica_type: str
    name: str


class DeleteJob(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Delete the job itself (TTL after finishing)."""


class GroupKind(msgspec.Struct, frozen=True):
    """The API of a gang-scheduling group object (tfjob.core.gang): where it lives."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class _GroupWrite(msgspec.Struct, frozen=True, kw_only=True):
    """A gang-scheduling group object to write whole (what creates and updates share)."""

    kind: GroupKind
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


class CreateGroup(_GroupWrite, tag=True, frozen=True, kw_only=True):
    """Create this gang-scheduling group object (a full manifest) before any pod.

    Group actions run one at a time, in plan order: a native Workload must exist
    before the PodGroup that refers to it.
    """


class UpdateGroup(_GroupWrite, tag=True, frozen=True, kw_only=True):
    """Replace an existing group object with this one (a PUT), because the job's
    computed spec changed (scaling, a new minAvailable or minResources; a queued job's
    Kueue Workload rewritten or moved to another queue) or a finalizer must go (a
    Kueue Workload that no longer holds quota, or is about to be deleted).

    The manifest is the object as observed, metadata and `resourceVersion` included,
    with only its spec or finalizers changed: the API server refuses it (409) if the
    group changed since it was read, and the job is reconciled again from what is
    there. The core plans at most one write of an object per plan.
    """


class UpdateGroupStatus(_GroupWrite, tag=True, frozen=True, kw_only=True):
    """Replace an existing group object's status (a PUT of its status subresource):
    the object as observed, `resourceVersion` included, with the status the core
    computed. A queued job's Kueue Workload (core/queued.py) is told this way that
    the job finished, that its pods are ready, or that an evicted job gave its quota
    back. Refused (409) like an UpdateGroup if the object changed since it was read.
    """


class DeleteGroup(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Delete the job's group object of this kind (a no-op if it is already gone)."""

    kind: GroupKind
    name: str


class _OwnedWrite(msgspec.Struct, frozen=True, kw_only=True):
    """An owned object (`OwnedKind`: an MPIJob's ConfigMap, a PyTorchJob's HPA) to
    write whole."""

    kind: OwnedKind
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


class CreateOwned(_OwnedWrite, tag=True, frozen=True, kw_only=True):
    """Create this object the job owns (a full manifest, labelled and owned by the
    job). One that exists already and is the job's is taken over (labelled)."""


class UpdateOwned(_OwnedWrite, tag=True, frozen=True, kw_only=True):
    """Replace an owned object (a PUT) whose owned fields differ from the job's wish:
    the object as observed, `resourceVersion` included, with those fields replaced,
    so the API server refuses it (409) if it changed since it was read."""


class DeleteOwned(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Delete an owned object the job no longer wants (a no-op if it is gone)."""

    kind: OwnedKind
    name: str


class SetSuspend(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Set the job's own `spec.runPolicy.suspend` to `value`, as Kueue does to the jobs
    it queues (core/queued.py): true while the job's Workload is not admitted, false
    once it is. The only write of the job's spec a plan makes, and a conditional one:
    the runtime patches only the job as it was read (its `resourceVersion`); refused,
    the job changed, so the runtime carries out none of the plan's later actions and
    reconciles it again. The plan already treats the job as suspended or not."""

    value: bool


Action = (
    CreatePod
    | DeletePod
    | CreateService
    | DeleteService
    | DeleteJob
    | CreateGroup
    | UpdateGroup
    | UpdateGroupStatus
    | DeleteGroup
    | CreateOwned
    | UpdateOwned
    | DeleteOwned
    | SetSuspend
)


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes Event about the job, with upstream's reason and message."""

    type: str  # "Normal" or "Warning"
    reason: str
    message: str


class Plan(msgspec.Struct, kw_only=True):
    """The result of one reconcile."""

    actions: list[Action] = []
    events: list[Event] = []
    status: JobStatus = msgspec.field(default_factory=JobStatus)
    status_changed: bool = False
    # Seconds until the core must look at the job again even if nothing changes
    # (activeDeadlineSeconds, ttlSecondsAfterFinished). None: only on change.
    requeue_after: float | None = None
    # True when the runtime must write `status` before carrying out the actions,
    # because the status records something the actions destroy (a restart count
    # taken from a pod that is about to be deleted).
    status_first: bool = False
    # The replica specs the plan's pods are made from when they are not the job's own
    # (its defaults applied): an admitted queued job's, each replica type with the
    # count Kueue admitted and its template with what the admission adds (flavors'
    # node labels and tolerations, labels, annotations). None: the job's own. The
    # runtime renders the CreatePod actions with them (`PodRenderer(job, settings,
    # plan.replica_specs)`); the stored job is not changed.
    replica_specs: dict[str, ReplicaSpec] | None = None

    @property
    def finished(self) -> bool:
        """Whether the new status is terminal (Succeeded or Failed)."""
        return is_finished(self.status)
