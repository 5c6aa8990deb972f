"""The operator process: one controller per kind, endpoints and (optionally) leader election.

Each enabled kind whose CRD the API server serves gets a controller
(kind_controller.py): its view of the caches, its queue, reconciler and workers;
Kubeflow Trainer's TrainJob too (trainjob_controller.py), when the TrainJob, runtime
and JobSet CRDs are served (a TrainJob becomes a JobSet: without JobSet's API none
could run). The
rest is shared by every kind: the caches (one informer per resource:
cache/shared.py, wired to the kinds' queues by handlers.py), the API client, the Event
recorder, the metrics, the gang groups, the endpoints, the Lease.

Start-up order matters:
1. the health endpoints answer first (liveness must not depend on the API server);
2. with leader election, wait for the Lease before touching anything;
3. ask the API server which enabled kinds it serves (a kind without its CRD is left
   out, with a warning; none at all is an error);
4. list and watch every resource (each served kind's jobs; pods, services and the
   other objects jobs own, one informer each for every kind) until every cache is
   synced - a reconcile before that would see a job without its pods and create
   duplicates;
5. freeze the garbage collector's view of the now-large, long-lived cache (Python's
   GC otherwise re-scans it on every collection: most of a big decode's time); what
   start-up made before the lists is frozen before them;
6. run N workers per kind.
Shutdown (SIGTERM/SIGINT): stop handing out work, let in-flight reconciles finish
(each writes its own status), write the recorded events (bounded), release the
Lease, exit 0. Losing the Lease exits 1
at once, as client-go does, so a new leader never overlaps with us for long.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import structlog

from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.cache.backoff import Backoff
from tfjob.runtimes.kubernetes.cache.shared import SharedInformers
from tfjob.runtimes.kubernetes.controller import kueue_api
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder
from tfjob.runtimes.kubernetes.controller.gang_groups import GangGroups, GangUnavailable
from tfjob.runtimes.kubernetes.controller.handlers import Router
from tfjob.runtimes.kubernetes.controller.kind_controller import Controller, KindController
from tfjob.runtimes.kubernetes.controller.leader import LeaderConfig, LeaderElector, LeadershipLost
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.server import Servers
from tfjob.runtimes.kubernetes.controller.trainjob_controller import TrainJobController
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Resource,
)

log = structlog.get_logger("tfjob.operator")

TRAINJOB = "TrainJob"  # its name among the kinds (--enable-scheme trainjob)
# What the TrainJob controller needs served: its own kinds and the JobSets it makes.
TRAINJOB_RESOURCES = (TRAINJOBS, TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES, JOBSETS)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
EVENT_FLUSH_SECONDS = 20.0  # inside a 30 s grace period
LOST_LEASE_EVENT_FLUSH_SECONDS = 1.0
DISCOVERY_PATIENCE = 60.0  # seconds a discovery request is retried at start-up


def default_lease_namespace() -> str:
    """The operator's own namespace: $POD_NAMESPACE, the service account's, or tfjob-system."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return "tfjob-system"


@dataclass(frozen=True)
class OperatorOptions:
    kubeconfig: str | None = None
    namespace: str | None = None  # None: every namespace
    workers: int = 4
    cluster_domain: str = ""
    metrics_port: int = 8080
    health_port: int = 8081
    bind_host: str = "0.0.0.0"
    leader_elect: bool = False
    lease_namespace: str = ""
    lease_name: str = "tfjob-operator"
    parallelism: int = 16  # concurrent creates/deletes within one reconcile
    kube_api_qps: float = 0.0  # 0: no client-side throttle
    kube_api_burst: int = 0
    gang_scheduler_name: str = ""  # "": gang scheduling off (tfjob.core.gang)
    # The kinds to serve, by kind name ("TFJob", "PyTorchJob", "TrainJob"); empty:
    # every kind (Kubeflow's --enable-scheme).
    kinds: tuple[str, ...] = ()
    # PyTorchJob's init container (Kubeflow's --pytorch-init-container-*).
    pytorch_init_container_image: str = Settings().pytorch_init_container_image
    pytorch_init_container_max_tries: int = Settings().pytorch_init_container_max_tries
    # MPIJob's launcher init container (Kubeflow's --mpi-kubectl-delivery-image).
    mpi_kubectl_delivery_image: str = Settings().mpi_kubectl_delivery_image
    # Who makes a queued job's Kueue Workload (--kueue-integration: Settings).
    kueue_integration: Literal["builtin", "external"] = "builtin"

    def settings(self) -> Settings:
        return Settings(
            cluster_domain=self.cluster_domain,
            gang_scheduler_name=self.gang_scheduler_name,
            pytorch_init_container_image=self.pytorch_init_container_image,
            pytorch_init_container_max_tries=self.pytorch_init_container_max_tries,
            mpi_kubectl_delivery_image=self.mpi_kubectl_delivery_image,
            kueue_integration=self.kueue_integration,
        )


class GroupVersion(msgspec.Struct):
    """The API server's discovery document of one group/version (its resources)."""

    class APIResource(msgspec.Struct):
        name: str

    resources: list[APIResource] = []


class Operator:
    """Everything the operator runs, wired together; `run` until `stop` is set."""

    def __init__(self, options: OperatorOptions, client: KubeClient) -> None:
        self.options = options
        self._client = client
        self.metrics = Metrics()
        client.on_response = self.metrics.count_request
        # Creates and deletes in flight: Events yield to them.
        self.writes = ReconcileWrites()
        self.recorder = EventRecorder(
            client.with_own_budget(), registry=self.metrics.registry, writes=self.writes
        )
        self.gang = (
            GangGroups(client, options.gang_scheduler_name) if options.gang_scheduler_name else None
        )
        self.enabled = enabled_kinds(tuple(k for k in options.kinds if k != TRAINJOB))
        self.trainjob_enabled = not options.kinds or TRAINJOB in options.kinds
        self.controllers: dict[str, KindController] = {}  # by kind name, as built
        self.trainjob: TrainJobController | None = None  # as built
        self.caches = self._build(self.enabled, trainjob=self.trainjob_enabled)
        self.serving: list[KindController] = []  # those whose CRD is installed (run)
        self.trainjob_serving = False
        self.elector = (
            LeaderElector(
                client,
                LeaderConfig(
                    namespace=options.lease_namespace or default_lease_namespace(),
                    name=options.lease_name,
                    identity=f"{socket.gethostname()}_{uuid.uuid4()}",
                ),
                on_status=self.metrics.leader_status(options.lease_name),
            )
            if options.leader_elect
            else None
        )
        self.servers = Servers(
            self.metrics,
            self.ready,
            host=options.bind_host,
            metrics_port=options.metrics_port,
            health_port=options.health_port,
        )
        self._synced = False

    def synced(self) -> bool:
        return self._synced

    def ready(self) -> bool:
        """What /readyz answers: a replica waiting for the Lease is ready (a standby,
        as controller-runtime's managers: readiness never waits on leadership, or a
        rolling update's new pod could not become Ready while the old one leads); the
        leader, and an operator without leader election, once the caches are synced."""
        standby = self.elector is not None and not self.elector.is_leader
        return standby or self._synced

    def _build(self, kinds: list[Framework[Any]], *, trainjob: bool) -> SharedInformers:
        """The caches of `kinds` (one informer per resource), a controller for each
        kind (and TrainJob's, with `trainjob`), and the routing of every cache change
        to its kind's queue."""
        options = self.options
        shared = SharedInformers(
            self._client,
            kinds,
            namespace=options.namespace,
            group_kinds=self.gang.kinds if self.gang else (),
            kueue=options.kueue_integration == "external",
            trainjobs=trainjob,
        )
        settings = options.settings()
        self.controllers = {
            kind.kind: KindController(
                kind,
                self._client,
                shared=shared,
                recorder=self.recorder,
                metrics=self.metrics,
                writes=self.writes,
                settings=settings,
                parallelism=options.parallelism,
                namespace=options.namespace,
            )
            for kind in kinds
        }
        router = Router(
            shared,
            queues={name: c.queue for name, c in self.controllers.items()},
            recorder=self.recorder,
        )
        router.wire()
        self.trainjob = None
        if shared.trainjobs is not None:
            self.trainjob = TrainJobController(
                self._client,
                informers=shared.trainjobs,
                recorder=self.recorder,
                metrics=self.metrics,
                writes=self.writes,
            )
            router.wire_trainjobs(self.trainjob.caches, self.trainjob.queue)
        return shared

    def running(self) -> list[Controller]:
        """Every controller serving: the v1 kinds' whose CRD is installed, TrainJob's."""
        trainjob = [self.trainjob] if self.trainjob_serving and self.trainjob else []
        return [*self.serving, *trainjob]

    # -- running ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set (0) or the Lease is lost (1)."""
        if self.gang is not None:
            try:  # as upstream: without the group API, gang scheduling cannot work
                await self.gang.check_served(self.options.namespace)
            except GangUnavailable as error:
                log.error("gang scheduling unavailable", error=str(error))
                return 1
        if self.options.kueue_integration == "external":
            try:  # tfjob makes the Workloads: without Kueue's API no queued job could run
                await kueue_api.check_served(self._client, self.options.namespace)
            except kueue_api.KueueUnavailable as error:
                log.error("kueue integration unavailable", error=str(error))
                return 1
        await self.servers.start()
        log.info("endpoints listening", addresses=self.servers.addresses())
        try:
            if self.elector is not None and not await _unless_stopped(self.elector.acquire(), stop):
                return 0
            served, trainjob = await self._served()
            if not served and not trainjob:
                log.error(
                    "no kind to serve: install a CRD of an enabled kind",
                    enabled=[k.kind for k in self.enabled]
                    + ([TRAINJOB] if self.trainjob_enabled else []),
                )
                return 1
            if len(served) < len(self.enabled) or trainjob != self.trainjob_enabled:
                self.caches = self._build(served, trainjob=trainjob)  # only what is served
            self.serving = [self.controllers[k.kind] for k in served]
            self.trainjob_serving = trainjob
            return await self._lead(stop)
        finally:
            if self.elector is not None:
                await self.elector.release()
            await self.servers.stop()

    async def _lead(self, stop: asyncio.Event) -> int:
        # What start-up made (modules, the wiring) is kept for good: frozen, the
        # collector no longer walks it while the lists fill the caches, nor in the
        # collection before the caches are frozen too (_sync).
        gc.collect()
        gc.freeze()
        background = [
            asyncio.create_task(informer.run(), name=f"informer-{informer.resource}")
            for informer in self.caches.informers()
        ]
        background += [
            asyncio.create_task(k.queue.run_timer(), name=f"queue-timer-{k.plural}")
            for k in self.running()
        ]
        background.append(asyncio.create_task(self.recorder.run(), name="events"))
        if self.elector is not None:
            background.append(asyncio.create_task(self.elector.hold(), name="lease"))
        try:
            if not await _unless_stopped(self._sync(), stop, background):
                return self._exit_code(background)
            async with asyncio.TaskGroup() as group:
                for kind in self.running():
                    for number in range(self.options.workers):
                        group.create_task(kind.work(), name=f"worker-{kind.plural}-{number}")
                group.create_task(self._stop_when(stop, background))
            # Events within the pod's 30 s grace period; when the Lease is lost, only a
            # moment for them: exit promptly.
            lost = _failed(background)
            await self.recorder.flush(
                LOST_LEASE_EVENT_FLUSH_SECONDS if lost else EVENT_FLUSH_SECONDS
            )
            return self._exit_code(background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)

    async def _sync(self) -> None:
        started = time.monotonic()
        await asyncio.gather(*(i.synced.wait() for i in self.caches.informers()))
        gc.collect()
        gc.freeze()
        self._synced = True
        log.info(
            "caches synced",
            seconds=round(time.monotonic() - started, 3),
            **{str(i.resource): len(i) for i in self.caches.informers()},
        )

    async def _served(self) -> tuple[list[Framework[Any]], bool]:
        """The enabled kinds whose resource the API server serves (their CRD is
        installed), and whether TrainJobs are served (enabled, with the runtimes' and
        JobSet's CRDs); each left out is named in a warning."""
        wanted = {(k.group, k.version) for k in self.enabled}
        if self.trainjob_enabled:
            wanted |= {(r.group, r.version) for r in TRAINJOB_RESOURCES}
        served = await self._discover(wanted)
        serving = []
        for kind in self.enabled:
            if (kind.group, kind.version, kind.plural) in served:
                serving.append(kind)
            else:
                log.warning(
                    "not serving a kind: its CRD is not installed",
                    kind=kind.kind,
                    resource=f"{kind.plural}.{kind.group}",
                )
        trainjob = False
        if self.trainjob_enabled:
            missing = [str(r) for r in TRAINJOB_RESOURCES if _triple(r) not in served]
            trainjob = not missing
            if missing:
                log.warning(
                    "not serving a kind: its CRD is not installed", kind=TRAINJOB, missing=missing
                )
        log.info("serving", kinds=[k.kind for k in serving] + ([TRAINJOB] if trainjob else []))
        return serving, trainjob

    async def _discover(self, group_versions: set[tuple[str, str]]) -> set[tuple[str, str, str]]:
        """(group, version, plural) of every resource these group/versions serve."""
        served: set[tuple[str, str, str]] = set()
        for group_version in sorted(group_versions):
            document = await self._discovery_document("/apis/{}/{}".format(*group_version))
            if document is not None:
                served |= {(*group_version, r.name) for r in document.resources}
        return served

    async def _discovery_document(self, path: str) -> GroupVersion | None:
        """One group/version's discovery document; None when it is not served (404).
        An answer that may change on its own (429, a 5xx, no answer) is asked again,
        backing off, for up to DISCOVERY_PATIENCE seconds: one throttled request must
        not stop the operator at start-up."""
        backoff = Backoff(first=0.1, cap=5.0, jitter=0.5)
        deadline = time.monotonic() + DISCOVERY_PATIENCE
        while True:
            try:
                return msgspec.json.decode(await self._client.get_path(path), type=GroupVersion)
            except ApiError as error:
                if error.not_found:
                    return None
                if (error.code != 429 and error.code < 500) or time.monotonic() > deadline:
                    raise
                log.warning("discovery failed, trying again", path=path, error=str(error))
            except TransportError as error:
                if time.monotonic() > deadline:
                    raise
                log.warning("discovery failed, trying again", path=path, error=str(error))
            await asyncio.sleep(backoff.delay())

    async def _stop_when(self, stop: asyncio.Event, background: list[asyncio.Task[None]]) -> None:
        """Shut the queue down on SIGTERM, or when a background task dies (lost Lease)."""
        await _unless_stopped(asyncio.Event().wait(), stop, background)
        log.info("stopping: finishing in-flight reconciles")
        for kind in self.running():
            kind.queue.shut_down()

    @staticmethod
    def _exit_code(background: list[asyncio.Task[None]]) -> int:
        for task in background:
            if task.done() and not task.cancelled():
                error = task.exception()
                if isinstance(error, LeadershipLost):
                    log.error("leadership lost", error=str(error))
                    return 1
                if error is not None:
                    log.error("background task failed", task=task.get_name(), error=repr(error))
                    return 1
        return 0


def enabled_kinds(names: tuple[str, ...]) -> list[Framework[Any]]:
    """The frameworks of the kinds named (every kind when none is), in FRAMEWORKS'
    order; an unknown name is the caller's error (the command line checks them)."""
    if not names:
        return list(FRAMEWORKS.values())
    unknown = set(names) - set(FRAMEWORKS)
    if unknown:
        raise ValueError(f"unknown kinds: {sorted(unknown)}")
    return [kind for name, kind in FRAMEWORKS.items() if name in names]


def _triple(resource: Resource) -> tuple[str, str, str]:
    return (resource.group, resource.version, resource.plural)


def _failed(tasks: list[asyncio.Task[None]]) -> bool:
    """Whether a background task died (a lost Lease among them)."""
    return any(t.done() and not t.cancelled() and t.exception() is not None for t in tasks)


async def _unless_stopped(
    work: Awaitable[object],
    stop: asyncio.Event,
    watch: list[asyncio.Task[None]] | None = None,
) -> bool:
    """Run `work`; True if it finished, False if `stop` was set (or a task in `watch`
    ended) first, in which case `work` is cancelled."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    waiting = {task, stopper, *(watch or [])}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done() and not task.cancelled() and task.exception() is None:
        return True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return False


async def serve(options: OperatorOptions) -> int:
    """Connect, run until SIGTERM/SIGINT, and return the exit code."""
    connecting = time.perf_counter()
    client = KubeClient.connect(
        options.kubeconfig,
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
    )
    kubeconfig_seconds = time.perf_counter() - connecting
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info(
        "starting",
        server=client.server,
        namespace=options.namespace or "(all)",
        kinds=list(options.kinds) or "(all)",
        workers=options.workers,
        leader_elect=options.leader_elect,
        kubeconfig_seconds=round(kubeconfig_seconds, 3),
    )
    try:
        return await Operator(options, client).run(stop)
    finally:
        await client.close()
        log.info("stopped")


def run(options: OperatorOptions) -> int:
    return asyncio.run(serve(options))
