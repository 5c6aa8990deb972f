"""The local run loop: observe, reconcile, act, until the job is over.

The same decision core as on Kubernetes drives it. Each turn hands the core the pods
(from LocalKubelet) and services (bookkeeping) that exist, carries out the plan's
actions in order, keeps the new status on the in-memory job, and then sleeps until
something changes: a process starts or exits, a pod is gone, the plan's
`requeue_after` passes (activeDeadlineSeconds, TTL), or the run is stopped. There is
no polling.

The run ends when a plan shows the job finished and asks for nothing more (its cleanup
was carried out), or when the core deletes the job (TTL). Whatever still runs then,
such as PS replicas kept by `cleanPodPolicy: None`, is stopped: locally, nothing may
outlive the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import msgspec
import yaml

from tfjob.api import constants as c
from tfjob.api.timestamps import rfc3339
from tfjob.api.types import Job, to_dict
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    Action,
    CreatePod,
    CreateService,
    DeleteJob,
    DeletePod,
    DeleteService,
    Event,
)
from tfjob.core.progress import ReplicaView, RunObserver
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.registry import framework_of, with_defaults
from tfjob.runtimes.local.kubelet import LocalKubelet
from tfjob.runtimes.local.ports import pick_addresses
from tfjob.runtimes.local.services import ServiceBook
from tfjob.runtimes.local.watchdog import Watchdog

J = TypeVar("J", bound=Job)


@dataclass(frozen=True)
class RunOptions:
    base_dir: Path  # relative workingDir values start here (the YAML's folder)
    run_dir: Path  # log files and the final job.yaml
    grace_period: float | None = None  # overrides terminationGracePeriodSeconds
    namespace: str | None = None  # overrides metadata.namespace


class LocalLoop:
    """What every local run shares around its reconcile loop: being stopped (Ctrl-C,
    SIGTERM), sleeping until a process changes or the plan's requeue, and the replicas
    as the live view shows them."""

    def __init__(self, options: RunOptions, observer: RunObserver) -> None:
        self.options = options
        self._observer = observer
        self._wake = asyncio.Event()
        self._stopping = False
        self._kubelet: LocalKubelet | None = None

    def stop(self) -> None:
        """End the run early (Ctrl-C, SIGTERM); a second call kills without grace."""
        if self._stopping and self._kubelet is not None:
            self._kubelet.kill_all()
        self._stopping = True
        self._wake.set()

    async def _sleep(self, seconds: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    @staticmethod
    def _replicas(kubelet: LocalKubelet) -> list[ReplicaView]:
        return [
            ReplicaView(
                replica=pod.replica,
                pod_name=pod.name,
                phase=pod.phase,
                restarts=pod.restarts,
                started_at=pod.started_at,
                terminating=pod.deleted_at is not None,
            )
            for pod in kubelet.local_pods()
        ]


class LocalRun(LocalLoop):
    """One job (of any kind) run to completion as local processes."""

    def __init__(self, job: Job, options: RunOptions, observer: RunObserver) -> None:
        super().__init__(options, observer)
        self.job = admitted(job, options.namespace)
        self._services = ServiceBook()
        self._last_events: set[Event] = set()
        self._files = _LocalFiles(self.job)
        self._settings = Settings(
            local_addresses=pick_addresses(self.job),
            require_image=False,
            local_files_dir=self._files.folder,
            local_as_root=os.geteuid() == 0,
        )

    async def run(self) -> Job:
        """Run the job; returns it with its final status. Every process is gone after."""
        watchdog = Watchdog()
        self._kubelet = LocalKubelet(
            base_dir=self.options.base_dir,
            log_dir=self.options.run_dir,
            addresses=self._settings.local_addresses,
            grace_period=self.options.grace_period,
            on_line=self._observer.log_line,
            on_change=self._wake.set,
            watchdog=watchdog,
            training_container=framework_of(self.job).container_name,
            not_inherited=framework_of(self.job).owned_env,
        )
        try:
            await self._loop(self._kubelet)
        finally:
            await self._kubelet.shutdown()
            watchdog.close()
            self._files.remove()
            self._save()
        return self.job

    async def _loop(self, kubelet: LocalKubelet) -> None:
        while not self._stopping:
            self._wake.clear()
            plan = reconcile(
                self.job, kubelet.pods(), self._services.list(), datetime.now(UTC), self._settings
            )
            # The status lives in memory and cannot fail to be written, so keeping it
            # before acting satisfies `status_first` whichever way the plan sets it.
            self.job.status = plan.status
            self._record(plan.events)
            pods = PodRenderer(self.job, self._settings, plan.replica_specs)
            acted = [self._act(kubelet, pods, action) for action in plan.actions]
            self._report(kubelet)
            if any(isinstance(a, DeleteJob) for a in plan.actions):
                return
            if plan.finished and not any(acted):
                return
            await self._sleep(plan.requeue_after)

    def _act(self, kubelet: LocalKubelet, pods: PodRenderer, action: Action) -> bool:
        """Carry out one action; False when it changed nothing (as a 404 or 409 would).

        Like the operator, the runtime reports the pods it created and deleted
        (upstream's SuccessfulCreatePod/SuccessfulDeletePod); services are mere
        bookkeeping here, so their events would only be noise.
        """
        match action:
            case CreatePod():
                done = kubelet.create_pod(pods.manifest(action))
                self._outcome(done, "SuccessfulCreatePod", f"Created pod: {action.name}")
            case DeletePod():
                done = kubelet.delete_pod(action.name)
                self._outcome(done, "SuccessfulDeletePod", f"Deleted pod: {action.name}")
            case CreateService():
                done = self._services.create(action.manifest)
            case DeleteService():
                done = self._services.delete(action.name)
            case DeleteJob():
                done = True
            case _:  # a gang group or an owned object: nothing of it exists locally
                done = False
        return done

    def _outcome(self, done: bool, reason: str, message: str) -> None:
        if done:
            self._observer.event(Event(type="Normal", reason=reason, message=message))

    def _record(self, events: list[Event]) -> None:
        """Pass on the plan's events, except those the previous plan had too: the core
        repeats some on every reconcile, as upstream does (e.g. ExitedWithCode while a
        pod stays terminated), and Kubernetes folds such repeats into one event."""
        for event in events:
            if event not in self._last_events:
                self._observer.event(event)
        self._last_events = set(events)

    def _report(self, kubelet: LocalKubelet) -> None:
        conditions = self.job.status.conditions
        self._observer.progress(conditions[-1].type if conditions else "", self._replicas(kubelet))

    def _save(self) -> None:
        self.options.run_dir.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(to_dict(self.job), sort_keys=False)
        (self.options.run_dir / "job.yaml").write_text(text)


class _LocalFiles:
    """The files the job's kind has a local run provide in place of what a cluster
    mounts from the job's own objects (MPIJob's hostfile and rsh agent), in a
    temporary folder of this run's, removed when the run ends."""

    def __init__(self, job: Job) -> None:
        files = framework_of(job).local_files(with_defaults(job))
        self.folder: str | None = None
        if not files:
            return
        self.folder = tempfile.mkdtemp(prefix=f"tfjob-{job.metadata.name}-")
        for name, (text, mode) in files.items():
            path = Path(self.folder) / name
            path.write_text(text)
            path.chmod(mode)

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def admitted(job: J, namespace: str | None) -> J:
    """The job as an API server would store it: namespace, uid, creationTimestamp."""
    meta = job.metadata
    return msgspec.structs.replace(
        job,
        metadata=msgspec.structs.replace(
            meta,
            namespace=namespace or meta.namespace or c.DEFAULT_NAMESPACE,
            uid=meta.uid or str(uuid.uuid4()),
            creation_timestamp=meta.creation_timestamp or rfc3339(datetime.now(UTC)),
        ),
    )
