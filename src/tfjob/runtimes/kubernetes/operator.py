"""The operator process: caches, workers, endpoints and (optionally) leader election.

Start-up order matters:
1. the health endpoints answer first (liveness must not depend on the API server);
2. with leader election, wait for the Lease before touching anything;
3. list and watch TFJobs, pods and services until all three caches are synced - a
   reconcile before that would see a job without its pods and create duplicates;
4. freeze the garbage collector's view of the now-large, long-lived cache (Python's
   GC otherwise re-scans it on every collection: most of a big decode's time); what
   start-up made before the lists is frozen before them;
5. run N workers.
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
from typing import Any

import structlog

from tfjob.api import constants as c
from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.api.observed import Pod, Service
from tfjob.core.settings import Settings
from tfjob.runtimes.kubernetes.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.client import KubeClient
from tfjob.runtimes.kubernetes.consistency import JobCaches
from tfjob.runtimes.kubernetes.decode import JOB_CODEC, POD_PROTO_CODEC, SERVICE_CODEC
from tfjob.runtimes.kubernetes.events import EventRecorder
from tfjob.runtimes.kubernetes.gang_groups import GangGroups, GangUnavailable
from tfjob.runtimes.kubernetes.handlers import Wiring
from tfjob.runtimes.kubernetes.informer import Informer
from tfjob.runtimes.kubernetes.leader import LeaderConfig, LeaderElector, LeadershipLost
from tfjob.runtimes.kubernetes.metrics import Metrics
from tfjob.runtimes.kubernetes.reconciler import Reconciler
from tfjob.runtimes.kubernetes.resources import OWNED_SELECTOR, PODS, SERVICES, TFJOBS
from tfjob.runtimes.kubernetes.server import Servers
from tfjob.runtimes.kubernetes.workqueue import WorkQueue

log = structlog.get_logger("tfjob.operator")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
EVENT_FLUSH_SECONDS = 20.0  # inside a 30 s grace period
LOST_LEASE_EVENT_FLUSH_SECONDS = 1.0


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


class Operator:
    """Everything the operator runs, wired together; `run` until `stop` is set."""

    def __init__(self, options: OperatorOptions, client: KubeClient) -> None:
        self.options = options
        self.metrics = Metrics()
        client.on_response = self.metrics.count_request
        self.queue = WorkQueue(hooks=self.metrics.queue_hooks())
        # Creates and deletes in flight: Events yield to them.
        self.writes = ReconcileWrites()
        self.recorder = EventRecorder(
            client.with_own_budget(), registry=self.metrics.registry, writes=self.writes
        )
        ns = options.namespace
        self.caches = JobCaches(
            jobs=Informer(client, TFJOBS, JOB_CODEC, namespace=ns),
            pods=Informer(
                client, PODS, POD_PROTO_CODEC, namespace=ns, label_selector=OWNED_SELECTOR
            ),
            services=Informer(
                client,
                SERVICES,
                SERVICE_CODEC,
                namespace=ns,
                label_selector=OWNED_SELECTOR,
                metadata_only=True,  # the core reads only a service's metadata
            ),
        )
        self._wire()
        self.gang = (
            GangGroups(client, self.recorder, self.metrics, options.gang_scheduler_name)
            if options.gang_scheduler_name
            else None
        )
        self.reconciler = Reconciler(
            client=client,
            caches=self.caches,
            recorder=self.recorder,
            metrics=self.metrics,
            settings=Settings(
                cluster_domain=options.cluster_domain,
                gang_scheduler_name=options.gang_scheduler_name,
            ),
            writes=self.writes,
            parallelism=options.parallelism,
            gang=self.gang,
        )
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
            self.synced,
            host=options.bind_host,
            metrics_port=options.metrics_port,
            health_port=options.health_port,
        )
        self._synced = False

    def _wire(self) -> None:
        wiring = Wiring(self.queue, self.recorder, self.metrics)
        self.caches.jobs.add_handlers(wiring.job_handlers())
        self.caches.pods.add_handlers(wiring.owned_handlers(Pod))
        self.caches.services.add_handlers(wiring.owned_handlers(Service))

    def synced(self) -> bool:
        return self._synced

    # -- running ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set (0) or the Lease is lost (1)."""
        if self.gang is not None:
            try:  # as upstream: without the group API, gang scheduling cannot work
                await self.gang.check_served(self.options.namespace)
            except GangUnavailable as error:
                log.error("gang scheduling unavailable", error=str(error))
                return 1
        await self.servers.start()
        log.info("endpoints listening", addresses=self.servers.addresses())
        try:
            if self.elector is not None and not await _unless_stopped(self.elector.acquire(), stop):
                return 0
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
            asyncio.create_task(self.caches.pods.run(), name="informer-pods"),
            asyncio.create_task(self.caches.services.run(), name="informer-services"),
            asyncio.create_task(self.caches.jobs.run(), name="informer-tfjobs"),
            asyncio.create_task(self.queue.run_timer(), name="queue-timer"),
            asyncio.create_task(self.recorder.run(), name="events"),
        ]
        if self.elector is not None:
            background.append(asyncio.create_task(self.elector.hold(), name="lease"))
        try:
            if not await _unless_stopped(self._sync(), stop, background):
                return self._exit_code(background)
            async with asyncio.TaskGroup() as group:
                for number in range(self.options.workers):
                    group.create_task(self._work(), name=f"worker-{number}")
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
        await asyncio.gather(*(i.synced.wait() for i in self._informers))
        gc.collect()
        gc.freeze()
        self._synced = True
        log.info(
            "caches synced",
            seconds=round(time.monotonic() - started, 3),
            tfjobs=len(self.caches.jobs),
            pods=len(self.caches.pods),
            services=len(self.caches.services),
        )

    @property
    def _informers(self) -> tuple[Informer[Any], ...]:
        return (self.caches.jobs, self.caches.pods, self.caches.services)

    async def _stop_when(self, stop: asyncio.Event, background: list[asyncio.Task[None]]) -> None:
        """Shut the queue down on SIGTERM, or when a background task dies (lost Lease)."""
        await _unless_stopped(asyncio.Event().wait(), stop, background)
        log.info("stopping: finishing in-flight reconciles")
        self.queue.shut_down()

    async def _work(self) -> None:
        """The worker loop: the one place that hands keys back to the queue, from the
        reconciler's Result or the kind of error it raised."""
        while True:
            # A reconcile with nothing to write, and get() with keys waiting, never
            # suspend: without this a worker would run a whole backlog (10,000 jobs
            # after a restart) in one go, and /readyz, /healthz and the watches with it.
            await asyncio.sleep(0)
            if (key := await self.queue.get()) is None:
                break
            structlog.contextvars.bind_contextvars(job=key)
            started = time.perf_counter()
            result = "success"
            try:
                outcome = await self.reconciler.reconcile(key)
            except Exception as error:  # a bad job must never stop a worker
                result = "error"
                self.metrics.reconcile_errors.labels(controller=c.CONTROLLER_NAME).inc()
                self.retry(key, error)
            else:
                self.queue.forget(key)
                if outcome.requeue_after is not None:
                    self.queue.add_after(key, outcome.requeue_after)
            finally:
                self.queue.done(key)
                elapsed = time.perf_counter() - started
                self.metrics.reconcile_time.labels(controller=c.CONTROLLER_NAME).observe(elapsed)
                self.metrics.reconcile_total.labels(
                    controller=c.CONTROLLER_NAME, result=result
                ).inc()
                structlog.contextvars.clear_contextvars()

    def retry(self, key: str, error: Exception) -> None:
        """Hand `key` back to the queue after `error` from a reconcile, by its kind:
        a PermanentError is given up (the job's next watch event brings it back), a
        TemporaryError with a `delay` comes back after it, anything else (a bug
        included) with per-key exponential backoff."""
        text = str(error) or repr(error)
        if isinstance(error, PermanentError):
            log.error("reconcile failed, not retrying", error=text)
            self.queue.forget(key)
        elif isinstance(error, TemporaryError) and error.delay is not None:
            log.info("reconciling again", after=error.delay, error=text)
            self.queue.add_after(key, error.delay)
        else:
            log.warning("reconcile failed, will retry", error=text)
            self.queue.add_rate_limited(key)

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
