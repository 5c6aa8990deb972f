"""One TrainJob reconcile: from the TrainJob, its runtime and what exists, a plan.

As Trainer v2.3.0's TrainJob controller: a TrainJob managed by another controller
(`spec.managedBy`, e.g. MultiKueue) is left alone. Otherwise a Failed condition other
than DeadlineExceeded is derived again each pass; an unfinished TrainJob gets its
objects (the snapshot, the runtime's side objects, the JobSet: created, re-applied
while it or its JobSet is suspended, then left to run); its Suspended condition and
its status from the JobSet follow (status.py); last the active deadline.

Where Trainer fails a TrainJob silently, tfjob says why in a Failed condition (and a
Warning Event), derived again each pass, so a runtime created or fixed later lets the
TrainJob go on:
- a runtimeRef of a kind Trainer has no runtime for (Trainer: reason
  TrainingRuntimeNotSupported meant, a nil-pointer panic each reconcile instead);
- a runtime that does not exist (Trainer: a Warning Event, retried forever), reason
  TrainingRuntimeNotFound;
- a runtime that cannot be built (an mlPolicy tfjob cannot apply, a quantity that
  is none), or a snapshot that is not this TrainJob's (Trainer: an Event, retried
  forever), reason InvalidTrainingRuntime.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tfjob.api import trainjob as tj
from tfjob.api.errors import PermanentError
from tfjob.api.training_runtime import RUNTIME_KINDS, TrainingRuntime
from tfjob.api.trainjob import Condition, TrainJob, TrainJobStatus, encode
from tfjob.core.plan import DeleteOwned, Event
from tfjob.core.trainjob import status as st
from tfjob.core.trainjob.conditions import remove_condition
from tfjob.core.trainjob.jobset import Built, build, owner_reference
from tfjob.core.trainjob.plan import (
    JOBSET,
    SECRET,
    ApplyObject,
    CreateObject,
    Observed,
    TrainJobAction,
    TrainJobPlan,
)
from tfjob.core.trainjob.podgroup import kind_of
from tfjob.core.trainjob.snapshot import (
    CONFIGMAP,
    SnapshotError,
    read_snapshot,
    same_spec,
    snapshot_configmap,
)
from tfjob.frameworks.mlpolicy.base import KeyPair, KeyPairNeeded

REASON_RUNTIME_NOT_FOUND = "TrainingRuntimeNotFound"
REASON_INVALID_RUNTIME = "InvalidTrainingRuntime"
#: Failed reasons tfjob itself derives each pass (not the JobSet's, not the deadline).
OWN_REASONS = (tj.REASON_RUNTIME_NOT_SUPPORTED, REASON_RUNTIME_NOT_FOUND, REASON_INVALID_RUNTIME)
EVENT_REASON = "TrainJobResourcesCreationFailed"


class _Failure(PermanentError):
    """Why this pass cannot make the TrainJob's objects: its Failed reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def reconcile_trainjob(
    trainjob: TrainJob,
    runtime: TrainingRuntime | None,
    observed: Observed,
    now: datetime,
    key_pair: KeyPair | None = None,
) -> TrainJobPlan:
    """The plan for one pass. `runtime`: the one spec.runtimeRef names, None if it does
    not exist; `key_pair`: a fresh key pair for an MPI runtime's Secret, used only
    while that Secret does not exist (without one then: `needs_key_pair`)."""
    old = trainjob.status
    if not trainjob.spec.managed_by_us:
        return TrainJobPlan(status=old)
    status, kept_failed = _drop_failed(old, observed)
    actions: list[TrainJobAction] = []
    events: list[Event] = []
    if not _supported(trainjob):
        status = st.with_failed(
            status, tj.REASON_RUNTIME_NOT_SUPPORTED, _unsupported(trainjob), now
        )
    elif not (st.finished(status) or kept_failed is not None):
        try:
            actions = _objects(trainjob, runtime, observed, key_pair)
        except KeyPairNeeded:
            return TrainJobPlan(status=old, needs_key_pair=True)
        except _Failure as failure:
            status = st.with_failed(status, failure.reason, failure.message, now)
            events.append(Event(type="Warning", reason=EVENT_REASON, message=_event(failure)))
    status = st.with_suspended(status, trainjob.spec.suspended, now)
    if observed.jobset is not None:
        status = st.from_jobset(status, observed.jobset, now)
    elif kept_failed is not None:
        status = TrainJobStatus(
            conditions=[*status.conditions, kept_failed],
            jobs_status=status.jobs_status,
            trainer_status=status.trainer_status,
        )
    status, requeue, deadline_actions = _deadline(trainjob, status, now)
    changed = encode(status) != encode(old)
    if changed and observed.jobset is not None:
        wait = st.first_counts_wait(old, status, observed.jobset, now)
        if wait is not None:  # the JobSet's first counts, all 0: not yet (status.py)
            status, changed = old, False
            requeue = wait if requeue is None else min(requeue, wait)
    return TrainJobPlan(
        actions=actions + deadline_actions,
        events=events,
        status=status,
        status_changed=changed,
        requeue_after=requeue,
    )


def _drop_failed(
    status: TrainJobStatus, observed: Observed
) -> tuple[TrainJobStatus, Condition | None]:
    """The status without a Failed condition that is derived again this pass.

    A Failed the JobSet gave, whose JobSet is gone, is returned to be kept: Trainer
    drops it there (its JobSet plugin then reports nothing); tfjob keeps a finished
    job finished."""
    failed = status.condition(tj.FAILED)
    if failed is None or failed.reason == tj.REASON_DEADLINE_EXCEEDED:
        return status, None
    kept = None
    if observed.jobset is None and failed.status == "True" and failed.reason not in OWN_REASONS:
        kept = failed
    return TrainJobStatus(
        conditions=remove_condition(status.conditions, tj.FAILED),
        jobs_status=status.jobs_status,
        trainer_status=status.trainer_status,
    ), kept


def _supported(trainjob: TrainJob) -> bool:
    ref = trainjob.spec.runtime_ref
    return ref.group_or_default == tj.GROUP and ref.kind_or_default in RUNTIME_KINDS


def _unsupported(trainjob: TrainJob) -> str:
    ref = trainjob.spec.runtime_ref
    group_kind = (
        f"{ref.kind_or_default}.{ref.group_or_default}"
        if ref.group_or_default
        else ref.kind_or_default
    )
    return f"unsupported runtime: {group_kind}"


def _event(failure: _Failure) -> str:
    message = f"TrainJob resources reconciliation failed: {failure.message[:950]}"
    return f"{message} ..." if len(failure.message) > 950 else message


def _runtime(
    trainjob: TrainJob, live: TrainingRuntime | None, observed: Observed
) -> tuple[TrainingRuntime, bool]:
    """The runtime to build from and whether the snapshot is to be (re)written."""
    if observed.snapshot is not None:
        try:
            snapped = read_snapshot(trainjob, observed.snapshot)
        except SnapshotError as err:
            raise _Failure(REASON_INVALID_RUNTIME, str(err)) from err
        # tfjob: a suspended TrainJob follows its runtime (snapshot.py says why).
        if trainjob.spec.suspended and live is not None and not same_spec(snapped, live):
            return live, True
        return snapped, False
    if live is None:
        raise _Failure(REASON_RUNTIME_NOT_FOUND, _not_found(trainjob))
    return live, True


def _not_found(trainjob: TrainJob) -> str:
    """Trainer v2.3.0's words for it (its Event's, after the prefix)."""
    ref = trainjob.spec.runtime_ref
    missing = f'{ref.kind_or_default}.{tj.GROUP} "{ref.name}" not found'
    if ref.kind_or_default == tj.TRAINING_RUNTIME:
        return f"TrainingRuntime specified in TrainJob is not found: {missing}"
    return f"not found ClusterTrainingRuntime specified in TrainJob: {missing}"


def _objects(
    trainjob: TrainJob, live: TrainingRuntime | None, observed: Observed, key_pair: KeyPair | None
) -> list[TrainJobAction]:
    runtime, write_snapshot = _runtime(trainjob, live, observed)
    suspended = trainjob.spec.suspended
    applies = observed.jobset is None or suspended or _jobset_suspended(observed.jobset)
    if not (applies or write_snapshot or _side_objects_of(runtime)):
        # The JobSet runs and nothing is made beside it: no build (its JobSet was
        # built from this snapshot and this spec, which a running TrainJob keeps).
        return []
    try:
        built = build(
            trainjob, runtime, secret_exists=observed.mpi_secret is not None, key_pair=key_pair
        )
    except ValueError as err:  # MLPolicyError, or a quantity that is none
        raise _Failure(REASON_INVALID_RUNTIME, str(err)) from err
    owner = owner_reference(trainjob)
    actions: list[TrainJobAction] = []
    if write_snapshot:
        kind = trainjob.spec.runtime_ref.kind_or_default
        manifest = snapshot_configmap(trainjob, runtime, kind, owner)
        actions.append(ApplyObject(kind=CONFIGMAP, manifest=manifest))
    actions.extend(_side_objects(built, observed))
    group_kind = kind_of(runtime.spec.pod_group_policy)
    wants_group = observed.pod_group is None or suspended
    if built.pod_group is not None and group_kind is not None and wants_group:
        actions.append(ApplyObject(kind=group_kind, manifest=built.pod_group))
    if applies:
        actions.append(ApplyObject(kind=JOBSET, manifest=built.jobset))
    return actions


def _side_objects_of(runtime: TrainingRuntime) -> bool:
    """Whether the runtime makes objects beside the JobSet (an MPI Secret and
    hostfile, a PodGroup): a pass checks them while the JobSet runs."""
    policy = runtime.spec.ml_policy
    mpi = policy is not None and policy.mpi is not None
    return mpi or kind_of(runtime.spec.pod_group_policy) is not None


def _side_objects(built: Built, observed: Observed) -> list[TrainJobAction]:
    """The MPI Secret to create; the hostfile to apply unless it is as wanted (Trainer
    applies it every pass: the same object, one request fewer)."""
    actions: list[TrainJobAction] = []
    for manifest in built.objects:
        if manifest["kind"] == "Secret":
            actions.append(CreateObject(kind=SECRET, manifest=manifest))
        elif not _as_wanted(observed.mpi_hostfile, manifest):
            actions.append(ApplyObject(kind=CONFIGMAP, manifest=manifest))
    return actions


def _as_wanted(observed: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if observed is None:
        return False
    owners = (observed.get("metadata") or {}).get("ownerReferences") or []
    return (
        observed.get("data") == wanted["data"]
        and wanted["metadata"]["ownerReferences"][0] in owners
    )


def _jobset_suspended(jobset: dict[str, Any]) -> bool:
    return bool((jobset.get("spec") or {}).get("suspend"))


def _deadline(
    trainjob: TrainJob, status: TrainJobStatus, now: datetime
) -> tuple[TrainJobStatus, float | None, list[TrainJobAction]]:
    due = st.deadline(trainjob, status)
    if due is None:
        return status, None, []
    if now > due:
        failed = st.with_failed(status, tj.REASON_DEADLINE_EXCEEDED, st.DEADLINE_MESSAGE, now)
        return failed, None, [DeleteOwned(kind=JOBSET, name=trainjob.metadata.name)]
    return status, max((due - now).total_seconds(), 1.0), []
