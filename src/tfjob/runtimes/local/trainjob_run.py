"""A TrainJob run to completion as local processes.

The TrainJob core (`core.trainjob.reconcile_trainjob`, the operator's) decides: given
the TrainJob, its runtime and what exists, it plans the runtime snapshot, the side
objects and the JobSet. Here the shell keeps those objects in memory and plays the
JobSet and Job controllers: the JobSet's Jobs' pods run as local pods
(jobset_pods.py, LocalKubelet), their states make the JobSet's status
(jobset_status.py), which the core turns into the TrainJob's (Complete or Failed).
Observe, reconcile, act, sleep until a change, as the v1 loop (run.py) does. Then
every process still running is stopped: nothing outlives the run.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import yaml

from tfjob.api.timestamps import rfc3339
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob, encode
from tfjob.core.plan import DeleteOwned, Event
from tfjob.core.progress import RunObserver
from tfjob.core.trainjob.plan import ApplyObject, CreateObject, Observed, TrainJobAction
from tfjob.core.trainjob.reconcile import reconcile_trainjob
from tfjob.core.trainjob.status import finished
from tfjob.frameworks.mlpolicy.base import KeyPair
from tfjob.runtimes.local.jobset_pods import PodSlot, jobs_of, pods_of
from tfjob.runtimes.local.jobset_status import PodState, job_states, jobset_status
from tfjob.runtimes.local.kubelet import LocalKubelet
from tfjob.runtimes.local.run import LocalLoop, RunOptions
from tfjob.runtimes.local.trainjob_mpi import LocalMPI
from tfjob.runtimes.local.watchdog import Watchdog
from tfjob.runtimes.mpi_keys import new_key_pair

DEFAULT_NAMESPACE = "default"
#: The trainer's container, whose output is shown as the pod's alone.
NODE_CONTAINER = "node"
#: What the runtimes' env sets (and torchrun's children read): never inherited from
#: tfjob's own environment, as a pod on a cluster does not have them either.
OWNED_ENV = (
    "PET_*", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS",
    "DMLC_*", "OMPI_MCA_*",
)  # fmt: skip


class LocalTrainJobRun(LocalLoop):
    """One TrainJob, with its runtime, run as local processes."""

    def __init__(
        self,
        trainjob: TrainJob,
        runtime: TrainingRuntime | None,
        options: RunOptions,
        observer: RunObserver,
    ) -> None:
        super().__init__(options, observer)
        self.trainjob = admitted_trainjob(trainjob, options.namespace)
        self.runtime = runtime
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._jobset: dict[str, Any] | None = None
        self._pods: list[PodSlot] = []
        self._failures: dict[str, int] = {}  # host name -> pods failed (restartPolicy Never)
        self._key_pair: KeyPair | None = None
        self._mpi = LocalMPI(self.trainjob.metadata.name, runtime)

    async def run(self) -> TrainJob:
        """Run the TrainJob; returns it with its final status. Every process is gone after."""
        watchdog = Watchdog()
        self._kubelet = LocalKubelet(
            base_dir=self.options.base_dir,
            log_dir=self.options.run_dir,
            grace_period=self.options.grace_period,
            on_line=self._observer.log_line,
            on_change=self._wake.set,
            watchdog=watchdog,
            training_container=NODE_CONTAINER,
            not_inherited=OWNED_ENV,
        )
        try:
            await self._loop(self._kubelet)
        finally:
            await self._kubelet.shutdown()
            watchdog.close()
            self._mpi.remove()
            self._save()
        return self.trainjob

    @property
    def jobset(self) -> dict[str, Any] | None:
        """The JobSet the core asked for, with the status the run gave it."""
        return self._jobset

    async def _loop(self, kubelet: LocalKubelet) -> None:
        while not self._stopping:
            self._wake.clear()
            self._observe(kubelet)
            plan = reconcile_trainjob(
                self.trainjob, self.runtime, self._observed(), datetime.now(UTC), self._key_pair
            )
            if plan.needs_key_pair:
                self._key_pair = new_key_pair()
                continue
            self.trainjob.status = plan.status
            self._record(plan.events)
            for action in plan.actions:
                self._act(kubelet, action)
            self._report(kubelet)
            if finished(self.trainjob.status):
                return
            await self._sleep(plan.requeue_after)

    def _observed(self) -> Observed:
        name = self.trainjob.metadata.name
        return Observed(
            jobset=self._jobset,
            snapshot=self._objects.get(("ConfigMap", f"{name}-runtime-snapshot")),
            mpi_secret=self._objects.get(("Secret", f"{name}-mpi-ssh-auth")),
            mpi_hostfile=self._objects.get(("ConfigMap", f"{name}-mpi-hostfile")),
        )

    def _act(self, kubelet: LocalKubelet, action: TrainJobAction) -> None:
        match action:
            case ApplyObject() | CreateObject() if action.kind.kind == "JobSet":
                self._start(kubelet, action.manifest)
            case ApplyObject():
                self._objects[(action.kind.kind, action.name)] = action.manifest
            case CreateObject():
                self._objects.setdefault((action.kind.kind, action.name), action.manifest)
            case DeleteOwned():  # past the deadline: the JobSet and its pods go
                for slot in self._pods:
                    kubelet.delete_pod(slot.manifest["metadata"]["name"])
                self._jobset = None

    def _start(self, kubelet: LocalKubelet, manifest: dict[str, Any]) -> None:
        """Make the JobSet's pods, once: a re-apply of a running JobSet changes nothing
        here (a suspended one is re-applied until it runs: its pods wait)."""
        if self._jobset is not None and self._pods:
            return
        self._jobset = {**manifest, "status": {}}
        if (manifest.get("spec") or {}).get("suspend"):
            return
        namespace = self.trainjob.metadata.namespace
        hostfile = self._objects.get(("ConfigMap", f"{manifest['metadata']['name']}-mpi-hostfile"))
        text = ((hostfile or {}).get("data") or {}).get("hostfile")
        self._pods = [self._mpi.localized(s, text) for s in pods_of(manifest, namespace)]
        for slot in self._pods:
            _in_file_folder(slot.manifest)
            self._create(kubelet, slot.manifest)

    def _create(self, kubelet: LocalKubelet, manifest: dict[str, Any]) -> None:
        """Start a pod, reported as the Job controller's SuccessfulCreate event."""
        name = manifest["metadata"]["name"]
        if kubelet.create_pod(manifest):
            event = Event(type="Normal", reason="SuccessfulCreate", message=f"Created pod: {name}")
            self._observer.event(event)

    def _observe(self, kubelet: LocalKubelet) -> None:
        """The JobSet's status from its pods; a failed pod of a restartPolicy Never Job
        is replaced while the Job may still retry it, as the Job controller does."""
        if self._jobset is None or not self._pods or self._terminal():
            return
        states = self._pod_states(kubelet)
        jobs = job_states(jobs_of(self._jobset), states)
        status, _ = jobset_status(self._jobset["spec"], jobs, rfc3339(datetime.now(UTC)))
        self._jobset = {**self._jobset, "status": status}
        if self._terminal():
            return
        for slot in self._pods:
            state = next(j for j in jobs if j.slot.name == slot.job.name)
            pod = slot.manifest["metadata"]["name"]
            never = slot.job.restart_policy == "Never"
            if never and _phase(kubelet, pod) == "Failed" and not state.failed_for_good:
                self._replace(kubelet, slot)

    def _pod_states(self, kubelet: LocalKubelet) -> list[PodState]:
        by_name = {p.name: p for p in kubelet.local_pods()}
        states = [
            PodState(job=slot.job.name, index=slot.index, phase="Failed", restarts=0)
            for slot in self._pods
            for _ in range(self._failures.get(slot.hostname, 0))
        ]
        for slot in self._pods:
            pod = by_name.get(slot.manifest["metadata"]["name"])
            if pod is not None and pod.deleted_at is None:  # a replaced one is counted above
                states.append(PodState(slot.job.name, slot.index, pod.phase, pod.restarts))
        return states

    def _replace(self, kubelet: LocalKubelet, slot: PodSlot) -> None:
        """A new pod for a failed one (restartPolicy Never), with the same host name and
        port; the failed one is counted and removed."""
        old = slot.manifest["metadata"]["name"]
        self._failures[slot.hostname] = self._failures.get(slot.hostname, 0) + 1
        kubelet.delete_pod(old)
        attempt = self._failures[slot.hostname]
        manifest = {**slot.manifest, "metadata": {**slot.manifest["metadata"]}}
        manifest["metadata"]["name"] = f"{slot.hostname}-retry{attempt}"
        new = PodSlot(slot.job, slot.index, slot.hostname, slot.port, manifest)
        self._pods = [new if s is slot else s for s in self._pods]
        self._create(kubelet, manifest)

    def _terminal(self) -> bool:
        status = (self._jobset or {}).get("status") or {}
        return bool(status.get("conditions"))

    def _record(self, events: list[Event]) -> None:
        for event in events:
            self._observer.event(event)

    def _report(self, kubelet: LocalKubelet) -> None:
        conditions = self.trainjob.status.conditions
        state = conditions[-1].type if conditions else ("Running" if self._pods else "Created")
        self._observer.progress(state, self._replicas(kubelet))

    def _save(self) -> None:
        """RUN_DIR/trainjob.yaml (the TrainJob with its final status) and jobset.yaml."""
        self.options.run_dir.mkdir(parents=True, exist_ok=True)
        document = {"apiVersion": self.trainjob.api_version, "kind": self.trainjob.kind}
        document |= encode(self.trainjob)
        (self.options.run_dir / "trainjob.yaml").write_text(
            yaml.safe_dump(document, sort_keys=False)
        )
        if self._jobset is not None:
            (self.options.run_dir / "jobset.yaml").write_text(
                yaml.safe_dump(self._jobset, sort_keys=False)
            )


def _in_file_folder(manifest: dict[str, Any]) -> None:
    """A container without workingDir runs in the TrainJob file's folder (a TrainJob
    cannot set one; on a cluster the image's own folder would apply), so a TrainJob
    and the scripts beside it run from anywhere; a relative one starts there too."""
    for container in manifest["spec"].get("containers") or []:
        container.setdefault("workingDir", ".")


def _phase(kubelet: LocalKubelet, name: str) -> str | None:
    pod = next((p for p in kubelet.local_pods() if p.name == name), None)
    return None if pod is None or pod.deleted_at is not None else pod.phase


def admitted_trainjob(trainjob: TrainJob, namespace: str | None) -> TrainJob:
    """The TrainJob as the API server stores it: namespace, uid, creationTimestamp."""
    meta = trainjob.metadata
    return msgspec.structs.replace(
        trainjob,
        metadata=msgspec.structs.replace(
            meta,
            namespace=namespace or meta.namespace or DEFAULT_NAMESPACE,
            uid=meta.uid or str(uuid.uuid4()),
            creation_timestamp=meta.creation_timestamp or rfc3339(datetime.now(UTC)),
        ),
    )
