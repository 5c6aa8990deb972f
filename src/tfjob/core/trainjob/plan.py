"""What one TrainJob reconcile asks of the shell: plain, comparable data.

Objects are written as Trainer writes them: server-side applied with field manager
`trainer`, forcing ownership (`ApplyObject`), except the MPI ssh Secret, which is
immutable and only created (`CreateObject`; one that exists is kept). `DeleteOwned`
(the v1 plan's) deletes the JobSet past the deadline. The actions are in the order
to carry them out: the snapshot, what pods mount, the PodGroup, then the JobSet.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.kinds import OwnedKind
from tfjob.api.trainjob import TrainJobStatus
from tfjob.core.plan import DeleteOwned, Event
from tfjob.core.trainjob.podgroup import COSCHEDULING, VOLCANO
from tfjob.core.trainjob.snapshot import CONFIGMAP

FIELD_MANAGER = "trainer"

JOBSET = OwnedKind(
    group="jobset.x-k8s.io",
    version="v1alpha2",
    kind="JobSet",
    plural="jobsets",
    owned_fields=("spec",),
)
SECRET = OwnedKind(group="", version="v1", kind="Secret", plural="secrets")


class ApplyObject(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Server-side apply this manifest (field manager `trainer`, force)."""

    kind: OwnedKind
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


class CreateObject(msgspec.Struct, tag=True, frozen=True, kw_only=True):
    """Create this manifest; an object of its name that exists already is kept."""

    kind: OwnedKind
    manifest: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


TrainJobAction = ApplyObject | CreateObject | DeleteOwned


class Observed(msgspec.Struct, kw_only=True):
    """What the shell observed of the TrainJob's objects (whole, as decoded JSON), each
    None when there is none: the JobSet (with its status), the runtime snapshot
    ConfigMap, the MPI Secret and hostfile ConfigMap, and the PodGroup."""

    jobset: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    mpi_secret: dict[str, Any] | None = None
    mpi_hostfile: dict[str, Any] | None = None
    pod_group: dict[str, Any] | None = None


class TrainJobPlan(msgspec.Struct, kw_only=True):
    """The result of one TrainJob reconcile."""

    actions: list[TrainJobAction] = []
    events: list[Event] = []
    status: TrainJobStatus = msgspec.field(default_factory=TrainJobStatus)
    status_changed: bool = False
    # Seconds until the active deadline: the shell reconciles again then.
    requeue_after: float | None = None
    # The pass needs a fresh MPI key pair (its Secret is to be made) and was given
    # none: nothing else is planned; the shell calls again with one. A key pair is
    # costly to make, so the shell makes one only when asked.
    needs_key_pair: bool = False


def watched_kinds() -> tuple[OwnedKind, ...]:
    """Every kind of object a TrainJob's plans write: what the shell watches, by owner."""
    return (JOBSET, CONFIGMAP, SECRET, COSCHEDULING, VOLCANO)
