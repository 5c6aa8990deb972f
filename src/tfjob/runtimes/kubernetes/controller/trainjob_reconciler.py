"""One reconcile of one TrainJob on Kubernetes: observe, ask the core, act, record.

The decisions are the core's (`core.trainjob.reconcile.reconcile_trainjob`). This
module reads the TrainJob, its JobSet and its runtime from the caches
(cache/trainjobs.py), reads by name the side objects the pass needs
(`core.trainjob.reads`), makes an MPI key pair only when the plan asks for one, then
carries the plan out through the one write path (writes.py) in the plan's order and
writes the status once (status_writer.py), after the actions (before them when they
delete the JobSet past the deadline: the Failed it records comes first):
- nothing is done for a TrainJob whose view is held (the caches lag our own
  writes), or that is being deleted;
- the first failed action stops the ones after it (the JobSet mounts what comes
  before it), the status is still written, and the TrainJob is retried;
- the MPI Secret is never read (the operator may only create Secrets): a Secret
  this process made, or found made (AlreadyExists), is remembered for its TrainJob,
  so later passes make no key pair;
- the runtime snapshot is read by name once per TrainJob, and not at all for a
  TrainJob created since the caches synced (none exists: cache/trainjobs.py
  `first_pass`); the snapshot a pass found
  (this TrainJob's, holding a runtime) or applied is remembered for the TrainJob's
  uid (its text, shared by the TrainJobs of one runtime), and later passes build
  from that without a GET (about 2.5 GETs per TrainJob otherwise: every pass of an
  unfinished TrainJob reads it). The snapshot is the operator's own object; a change
  to it by another writer is not seen until the operator restarts (docs/consistency.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from tfjob.api import trainjob as tj
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob, TrainJobStatus
from tfjob.core.plan import DeleteOwned
from tfjob.core.trainjob.plan import (
    SECRET,
    ApplyObject,
    CreateObject,
    Observed,
    TrainJobPlan,
)
from tfjob.core.trainjob.reads import Read, reads, snapshot_read
from tfjob.core.trainjob.reconcile import reconcile_trainjob
from tfjob.core.trainjob.snapshot import (
    CONFIGMAP,
    DATA_KEY,
    SnapshotError,
    read_snapshot,
    snapshot_name,
)
from tfjob.runtimes.kubernetes.cache.consistency import Held
from tfjob.runtimes.kubernetes.cache.trainjobs import TrainJobCaches, TrainJobView
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.reconciler import DONE, Result, actions_failure
from tfjob.runtimes.kubernetes.controller.status_writer import StatusConflict, StatusWriter
from tfjob.runtimes.kubernetes.controller.writes import Writer
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import TRAINJOBS, resource_of
from tfjob.runtimes.mpi_keys import new_key_pair

#: The Events' source, as Trainer's TrainJob controller names itself.
REPORTER = "trainer-trainjob-controller"


class TrainJobReconciler:
    """Carries out the core's plans for TrainJobs, one TrainJob at a time (per call)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        caches: TrainJobCaches,
        recorder: EventRecorder,
        metrics: Metrics,
        writes: ReconcileWrites,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._caches = caches
        self._recorder = recorder
        self._status = StatusWriter.for_trainjob(client)
        self._writer = Writer(None, client, recorder, metrics, writes)
        self._clock = clock
        self._secrets: dict[str, str] = {}  # TrainJob key -> uid whose Secret exists
        self._snapshots: dict[str, tuple[str, str]] = {}  # key -> (uid, snapshot's text)
        self._texts: dict[str, str] = {}  # the snapshots' texts, each held once

    async def reconcile(self, key: str) -> Result:
        """Bring TrainJob `key` one step closer to what the core wants."""
        view = self._caches.view(key)
        if view is None:
            self._secrets.pop(key, None)
            self._snapshots.pop(key, None)
            return DONE
        if isinstance(view, Held):
            return Result(requeue_after=view.seconds + 0.001)
        if view.trainjob.metadata.deletion_timestamp is not None:
            return DONE
        try:
            return await self._carry_out(view)
        finally:
            self._caches.hold(view)

    async def _carry_out(self, view: TrainJobView) -> Result:
        trainjob = view.trainjob
        runtime = self._caches.informers.runtime(trainjob)
        observed = await self._observe(view, runtime)
        now = self._clock()
        plan = reconcile_trainjob(trainjob, runtime, observed, now)
        if plan.needs_key_pair:
            plan = reconcile_trainjob(trainjob, runtime, observed, now, new_key_pair())
        ref = _ref(trainjob)
        for event in plan.events:
            self._recorder.record(ref, event.type, event.reason, event.message)
        # Past the deadline the status (Failed) is stored before the JobSet is deleted:
        # a pass that saw the JobSet gone and no Failed would make it again.
        status_first = any(isinstance(a, DeleteOwned) for a in plan.actions)
        if plan.status_changed and status_first:
            await self._write_status(view, plan)
        error = await self._act(view, ref, plan)
        if plan.status_changed and not status_first:
            await self._write_status(view, plan)
        if error is not None:
            raise actions_failure([error])
        return Result(requeue_after=plan.requeue_after)

    async def _act(
        self, view: TrainJobView, ref: ObjectRef, plan: TrainJobPlan
    ) -> Exception | None:
        """Each action in order; the first that fails ends them."""
        for action in plan.actions:
            error = await self._writer.apply(view, ref, self._writer.write_of_trainjob(action))
            if error is not None:
                return error
            if isinstance(action, CreateObject) and action.kind == SECRET:
                self._secrets[view.key] = view.trainjob.metadata.uid
            elif isinstance(action, ApplyObject) and action.kind == CONFIGMAP:
                self._remember(view.key, view.trainjob, action.manifest)
        return None

    async def _write_status(self, view: TrainJobView, plan: TrainJobPlan) -> None:
        trainjob = view.trainjob
        try:
            version = await self._status.write(trainjob.metadata, trainjob.status, plan.status)
        except StatusConflict as conflict:
            view.wrote(TRAINJOBS, conflict.resource_version)
            raise
        if version is not None:
            view.wrote(TRAINJOBS, version)

    # -- observing --------------------------------------------------------------------

    async def _observe(self, view: TrainJobView, runtime: TrainingRuntime | None) -> Observed:
        """The JobSet from the cache; the snapshot and what the runtimes it may build
        from need, read by name; the Secret as remembered."""
        trainjob = view.trainjob
        observed = Observed(jobset=view.jobset)
        first = snapshot_read(trainjob)
        if first is None:
            self._snapshots.pop(view.key, None)  # no pass reads it any more
            return observed
        runtimes = [runtime] if runtime is not None else []
        known = self._snapshots.get(view.key)
        first_pass = self._caches.first_pass(view.key, trainjob.metadata.uid)
        if first_pass and view.jobset is None and trainjob.status == TrainJobStatus():
            pass  # created since the caches synced: no snapshot exists yet (trainjobs.py)
        elif known is not None and known[0] == trainjob.metadata.uid:
            observed.snapshot = _snapshot(trainjob, known[1])
            with contextlib.suppress(SnapshotError):
                runtimes.append(read_snapshot(trainjob, observed.snapshot))
        else:
            observed.snapshot = await self._read(trainjob, first)
            if observed.snapshot is not None:
                with contextlib.suppress(SnapshotError):  # the core fails it, naming why
                    runtimes.append(read_snapshot(trainjob, observed.snapshot))
                    self._remember(view.key, trainjob, observed.snapshot)
        for read in reads(trainjob, runtimes):
            setattr(observed, read.field, await self._read(trainjob, read))
        if self._secrets.get(view.key) == trainjob.metadata.uid:
            observed.mpi_secret = {"metadata": {"name": trainjob.metadata.name}}
        return observed

    def _remember(self, key: str, trainjob: TrainJob, configmap: dict[str, Any]) -> None:
        """Remember TrainJob `key`'s snapshot, found valid or applied by this process
        (`configmap`; another of its ConfigMaps is not remembered)."""
        if (configmap.get("metadata") or {}).get("name") != snapshot_name(trainjob):
            return
        text = (configmap.get("data") or {}).get(DATA_KEY)
        if not isinstance(text, str):
            return
        if text not in self._texts and len(self._texts) >= _TEXTS:
            self._texts.pop(next(iter(self._texts)))
        text = self._texts.setdefault(text, text)
        self._snapshots[key] = (trainjob.metadata.uid, text)

    async def _read(self, trainjob: TrainJob, read: Read) -> dict[str, Any] | None:
        """One object by name; None if it is not there (or its kind is not served)."""
        namespace = trainjob.metadata.namespace
        try:
            raw = await self._client.get(resource_of(read.kind), namespace, read.name)
        except ApiError as error:
            if error.not_found:
                return None
            raise
        document: dict[str, Any] = _decode(raw)
        return document


#: Distinct snapshot texts held at once (one per runtime and kind in use).
_TEXTS = 64


def _snapshot(trainjob: TrainJob, text: str) -> dict[str, Any]:
    """A remembered snapshot as the core reads a ConfigMap: this TrainJob's, and
    its text."""
    owner = {"controller": True, "uid": trainjob.metadata.uid}
    return {"metadata": {"name": snapshot_name(trainjob), "ownerReferences": [owner]},
            "data": {DATA_KEY: text}}  # fmt: skip


def _decode(raw: bytes) -> dict[str, Any]:
    document = msgspec.json.decode(raw)
    return document if isinstance(document, dict) else {}


def _ref(trainjob: TrainJob) -> ObjectRef:
    meta = trainjob.metadata
    return ObjectRef(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
        kind=tj.KIND,
        api_version=tj.API_VERSION,
        reporter=REPORTER,
    )
