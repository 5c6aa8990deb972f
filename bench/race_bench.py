"""An equal-work race: `tfjob operator` against Kubeflow's training-operator v1.9.4.

Each run gets a fresh control plane (testkit/controlplane.py: real etcd and
kube-apiserver, our CRD) and one operator, alternately tfjob and Kubeflow, at the same
client limits (--kube-api-qps/--kube-api-burst) and the same number of reconcile
threads (4). The bench submits N jobs of 4 pods (TFJobs: 4 Workers; with `--kind
pytorchjob`, PyTorchJobs: a Master and 3 Workers; each operator serving only that
kind, `--enable-scheme`) and plays the kubelet: every pod
goes Running as soon as it exists; once its job is Running, the job's pods succeed.
It watches pods, services, TFJobs and Events and counts the work each operator does:
pods and services created, status writes (TFJob MODIFIED events), Event objects and
the occurrences they carry (`count`). Figures per run:
- time until all of that work is in the API server: the last operator-made change
  seen, once every job has Succeeded and nothing changed for QUIET seconds;
- reaction: from the write of a job's first Running pod status to its Running
  condition on the watch, p50/p99 (and the same for worker 0 Succeeded -> Succeeded);
- operator CPU seconds (user+system) and peak RSS over the run;
- for tfjob, its own count of recorded event occurrences (/metrics) against the
  occurrences the API server holds: equal means no Event was lost.
Then every ratio tfjob/Kubeflow, per size and limit.

Kubeflow's operator (tools/envtest/build.sh builds it into the cache) starts only
once its webhook certificate Secret exists in namespace `kubeflow` (it fills it and
writes the serving certificate files); no webhook configuration is installed, so
TFJobs are not validated by it - the same as tfjob, which has no webhook.

Run: python bench/race_bench.py [--jobs 200 2000] [--limits 20:30 1000:2000] [--kind pytorchjob]
[--order tfjob] [--profile] (tfjob under cProfile, stats in the logs folder)
[--order kubeflow,baseline,tfjob --baseline-src ../before/src] (before/after, one run)
[--every-kind] (every kind's CRD installed and every operator serving every kind, as a
default install does: the streams each operator opens then matter; without it each
serves only the raced kind)
[--kind trainjob] (Kubeflow Trainer v2's TrainJobs: tfjob against Trainer v2.3.0's
controller manager with the real JobSet controller; order `trainer,tfjob` unless
--order says otherwise; bench/trainjob_race.py says what is run and measured)
The machine's load matters (2 cores shared by etcd, the API server, the operator and
this script): compare the ratios, measured in the same session.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_bench import (  # type: ignore[import-not-found]
    control_plane,
    create_namespace,
    running_status,
)

from testkit.controlplane import ControlPlane, find_assets
from testkit.helpers import free_port, job_manifest
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, SERVICES, Resource, jobs_of

NAMESPACE = "race"
THREADS = 4
QUIET = 3.0  # seconds without an operator-made change that end a run
KUBELET_WRITES = 16  # pod status writes in flight at once
SECRETS = Resource("", "v1", "secrets")
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
SUBMITTERS = 32  # job creates in flight at once


@dataclass(frozen=True)
class Workload:
    """The kind raced and its job of 4 pods: a master type's replica, if the kind
    has one and `with_master`, and Workers for the rest."""

    kind: Framework[Any]
    with_master: bool

    @property
    def resource(self) -> Resource:
        return jobs_of(self.kind)

    @property
    def crd(self) -> str:
        return "crd.yaml" if self.kind.kind == "TFJob" else f"{self.kind.plural[:-1]}-crd.yaml"

    def specs(self) -> dict[str, Any]:
        container = {"name": self.kind.container_name, "image": "registry.example/train:1"}
        template = {"template": {"spec": {"containers": [container]}}}
        if not self.with_master:
            return {"Worker": {"replicas": 4, **template}}
        return {
            self.kind.master_types[0]: {"replicas": 1, **template},
            "Worker": {"replicas": 3, **template},
        }

    def manifest(self, name: str) -> dict[str, Any]:
        kind = self.kind
        return job_manifest(
            kind.kind, kind.spec_field, name, NAMESPACE, self.specs(),
            runPolicy={"cleanPodPolicy": "None"},
        )  # fmt: skip

    def pods(self, job: str) -> list[str]:
        return [
            f"{job}-{t.lower()}-{i}" for t, s in self.specs().items() for i in range(s["replicas"])
        ]


WORKLOAD = Workload(FRAMEWORKS["TFJob"], with_master=False)  # main() sets --kind's
EVERY_KIND = False  # main() sets --every-kind


async def submit(client: KubeClient, count: int) -> None:
    gate = asyncio.Semaphore(SUBMITTERS)

    async def one(i: int) -> None:
        async with gate:
            await client.create(WORKLOAD.resource, NAMESPACE, WORKLOAD.manifest(f"j{i}"))

    await asyncio.gather(*(one(i) for i in range(count)))


# -- the two operators -----------------------------------------------------------------


class Process:
    """An operator subprocess with its CPU and peak RSS sampled."""

    def __init__(
        self,
        args: list[str],
        log: Path,
        metrics_port: int,
        ready_url: str,
        env: dict[str, str] | None = None,
    ) -> None:
        with log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.log = log
        self.metrics_port = metrics_port
        self.ready_url = ready_url
        self._ps = psutil.Process(self.process.pid)
        self.peak_rss = 0
        self._cpu0 = 0.0
        self._system0 = 0.0

    async def ready(self, within: float = 180.0) -> None:
        deadline = time.monotonic() + within
        while not _answers(self.ready_url):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"operator not ready:\n{self.log.read_text()[-3000:]}")
            await asyncio.sleep(0.1)

    def start_counting(self) -> None:
        self._cpu0 = self.cpu()
        self._system0 = float(self._ps.cpu_times().system)

    def cpu(self) -> float:
        times = self._ps.cpu_times()
        return float(times.user + times.system)

    def cpu_used(self) -> float:
        return self.cpu() - self._cpu0

    def system_used(self) -> float:
        """The kernel's part of `cpu_used` (sockets, epoll, timers)."""
        return float(self._ps.cpu_times().system) - self._system0

    async def sample_rss(self) -> None:
        while self.process.poll() is None:
            with contextlib.suppress(psutil.Error):
                self.peak_rss = max(self.peak_rss, self._ps.memory_info().rss)
            await asyncio.sleep(0.1)

    def metrics(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        found: dict[str, float] = {}
        with urllib.request.urlopen(url, timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line and not line.startswith("#") and " " in line:
                    series, value = line.rsplit(" ", 1)
                    found[series] = float(value)
        return found

    def stop(self, timeout: float = 40.0) -> float:
        """SIGTERM; the seconds it took to exit."""
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return time.monotonic() - started


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _start(
    name: str,
    command: list[str],
    plane: ControlPlane,
    qps: int,
    burst: int,
    folder: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> Process:
    """A Python operator (tfjob, or the floor) on our namespace, ports and limits."""
    metrics, health = free_port(), free_port()
    args = [
        *command,
        "--kubeconfig",
        str(plane.kubeconfig_path),
        "--namespace",
        NAMESPACE,
        "--metrics-port",
        str(metrics),
        "--health-port",
        str(health),
        "--kube-api-qps",
        str(qps),
        "--kube-api-burst",
        str(burst),
        *extra,
    ]
    ready = f"http://127.0.0.1:{health}/readyz"
    return Process(args, folder / f"{name}.log", metrics, ready, env)


def start_tfjob(
    plane: ControlPlane,
    qps: int,
    burst: int,
    folder: Path,
    profile: Path | None = None,
    src: str | None = None,
) -> Process:
    """`tfjob operator`; with `profile`, under cProfile, its stats written there at exit;
    with `src`, the tfjob of that tree's src/ (the baseline of a before/after run)."""
    python = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
    command = [*python, "-m", "tfjob", "operator"]
    extra = (
        "--bind-address", "127.0.0.1", "--workers", str(THREADS), *_schemes(),
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": src} if src else None
    name = "baseline" if src else "tfjob"
    return _start(name, command, plane, qps, burst, folder, *extra, env=env)


def _schemes() -> list[str]:
    """The operators' --enable-scheme: the raced kind, or none (every kind)."""
    return [] if EVERY_KIND else [f"--enable-scheme={WORKLOAD.kind.scheme}"]


def _crds() -> tuple[str, ...]:
    """The CRDs installed: the raced kind's (TFJob's too), or every kind's."""
    if EVERY_KIND:
        return tuple(Workload(k, with_master=False).crd for k in FRAMEWORKS.values())
    return tuple(dict.fromkeys(("crd.yaml", WORKLOAD.crd)))


def start_floor(
    plane: ControlPlane, qps: int, burst: int, folder: Path, *, events: bool
) -> Process:
    """bench/floor_operator.py: only the race's required writes (with `events`, also
    the Events tfjob records for them), as soon and as many at once as it may."""
    command = [sys.executable, str(Path(__file__).resolve().parent / "floor_operator.py")]
    name = "floor-events" if events else "floor"
    return _start(name, command, plane, qps, burst, folder, *(["--events"] if events else []))


async def start_kubeflow(
    client: KubeClient, plane: ControlPlane, qps: int, burst: int, folder: Path
) -> Process:
    """Kubeflow's operator, the raced kind only, with the Secret its cert rotator fills."""
    with contextlib.suppress(Exception):
        await create_namespace(client, "kubeflow")
    secret = {"metadata": {"name": "training-operator-webhook-cert", "namespace": "kubeflow"}}
    await client.create(SECRETS, "kubeflow", secret)
    metrics, health, webhook = free_port(), free_port(), free_port()
    binary = plane.assets.tool("training-operator")
    args = [
        str(binary),
        "--kubeconfig",
        str(plane.kubeconfig_path),
        "--namespace",
        NAMESPACE,
        *_schemes(),
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--webhook-server-port={webhook}",
        f"--controller-threads={THREADS}",
        f"--kube-api-qps={qps}",
        f"--kube-api-burst={burst}",
        "--zap-log-level=error",
    ]
    process = Process(args, folder / "kubeflow.log", metrics, f"http://127.0.0.1:{health}/readyz")
    await mount_certificates(client)
    return process


async def mount_certificates(client: KubeClient, within: float = 120.0) -> None:
    """Do what the kubelet's Secret volume does in a cluster: once Kubeflow's cert
    rotator has filled its Secret, put the files where its webhook server reads them."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        raw = await client.get(SECRETS, "kubeflow", "training-operator-webhook-cert")
        data = msgspec.json.decode(raw).get("data") or {}
        if all(k in data for k in ("ca.crt", "tls.crt", "tls.key")):
            _write_certificates(data)
            return
        await asyncio.sleep(0.2)
    raise RuntimeError("Kubeflow's cert rotator did not fill its Secret")


def _write_certificates(data: dict[str, str]) -> None:
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        (CERT_DIR / key).write_bytes(base64.b64decode(value))


# -- watching the work and playing the kubelet -------------------------------------------


class _Meta(msgspec.Struct):
    name: str = ""
    labels: dict[str, str] = {}
    resourceVersion: str = ""


class _Cond(msgspec.Struct):
    type: str
    status: str


class _JobStatus(msgspec.Struct):
    conditions: list[_Cond] = []
    phase: str = ""  # pods


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _JobStatus = msgspec.field(default_factory=_JobStatus)
    count: int = 0
    reason: str = ""  # Events


class _Watch(msgspec.Struct):
    type: str
    object: _Obj


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct):
    metadata: _ListMeta
    items: list[_Obj] = []


@dataclass
class Observer:
    """Counts what the operator writes and moves pods through their phases."""

    client: KubeClient
    jobs: int
    pods: set[str] = field(default_factory=set)
    services: set[str] = field(default_factory=set)
    status_writes: int = 0
    event_counts: dict[str, int] = field(default_factory=dict)
    event_reasons: dict[str, str] = field(default_factory=dict)
    last_change: float = 0.0
    running_written: dict[str, float] = field(default_factory=dict)
    running_seen: dict[str, float] = field(default_factory=dict)
    success_written: dict[str, float] = field(default_factory=dict)
    succeeded_seen: dict[str, float] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _kubelet: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(KUBELET_WRITES))
    _succeeding: set[str] = field(default_factory=set)
    _started: set[str] = field(default_factory=set)

    async def start(self) -> None:
        for resource, handler in (
            (PODS, self._pod),
            (SERVICES, self._service),
            (WORKLOAD.resource, self._job),
            (EVENTS, self._event),
        ):
            listing = msgspec.json.decode(
                await self.client.list(resource, NAMESPACE, limit=1), type=_List
            )
            task = asyncio.create_task(
                self._watch(resource, listing.metadata.resourceVersion, handler)
            )
            task.add_done_callback(_report)
            self._tasks.append(task)

    async def _watch(self, resource: Resource, version: str, handler: Any) -> None:
        """Watch for good: resume after the server ends a watch (it drops one whose
        reader falls behind), relist on 410 - as an informer does."""
        while True:
            try:
                async for line in self.client.watch(
                    resource, NAMESPACE, resource_version=version, timeout_seconds=600
                ):
                    event = msgspec.json.decode(line, type=_Watch)
                    if event.type == "ERROR":
                        raise ApiError(410, "Expired", "watch ERROR event")
                    version = event.object.metadata.resourceVersion or version
                    if event.type != "BOOKMARK":
                        handler(event)
            except ApiError as error:
                if not error.gone:
                    await asyncio.sleep(0.5)
                    continue
                version = await self._relist(resource, handler)
            except TransportError:
                await asyncio.sleep(0.5)

    async def _relist(self, resource: Resource, handler: Any) -> str:
        token, version = "", ""
        while True:
            page = msgspec.json.decode(
                await self.client.list(resource, NAMESPACE, continue_=token), type=_List
            )
            version = version or page.metadata.resourceVersion
            for item in page.items:
                handler(_Watch("ADDED", item))
            token = page.metadata.continue_
            if not token:
                return version

    def _changed(self) -> None:
        self.last_change = time.perf_counter()

    def _pod(self, event: _Watch) -> None:
        name = event.object.metadata.name
        if event.type == "DELETED":
            return
        if name not in self.pods:
            self.pods.add(name)
            self._changed()
        if name not in self._started and event.object.status.phase in ("", "Pending"):
            self._started.add(name)
            self._spawn(self._run_pod(event.object.metadata))

    def _service(self, event: _Watch) -> None:
        if event.type == "ADDED" and event.object.metadata.name not in self.services:
            self.services.add(event.object.metadata.name)
            self._changed()

    def _job(self, event: _Watch) -> None:
        if event.type == "MODIFIED":
            self.status_writes += 1
            self._changed()
        now = time.perf_counter()
        name = event.object.metadata.name
        true = {c.type for c in event.object.status.conditions if c.status == "True"}
        if "Running" in true or "Succeeded" in true:
            self.running_seen.setdefault(name, now)
            if name not in self._succeeding:
                self._succeeding.add(name)
                self._spawn(self._finish_job(name))
        if "Succeeded" in true:
            self.succeeded_seen.setdefault(name, now)

    def _event(self, event: _Watch) -> None:
        if event.type in ("ADDED", "MODIFIED"):
            self.event_counts[event.object.metadata.name] = max(event.object.count, 1)
            self.event_reasons[event.object.metadata.name] = event.object.reason
            self._changed()

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.append(task)
        task.add_done_callback(_report)

    async def _run_pod(self, meta: _Meta) -> None:
        job = meta.labels.get("training.kubeflow.org/job-name", "")
        async with self._kubelet:
            await self._patch_status(meta.name, running_status({}))
        self.running_written.setdefault(job, time.perf_counter())

    async def _finish_job(self, job: str) -> None:
        names = WORKLOAD.pods(job)
        async with self._kubelet:
            await asyncio.gather(*(self._patch_status(n, _succeeded()) for n in names))
        self.success_written.setdefault(job, time.perf_counter())

    async def _patch_status(self, pod: str, body: dict[str, Any]) -> None:
        for _attempt in range(300):
            try:
                await self.client.merge_patch(PODS, NAMESPACE, pod, body, subresource="status")
                return
            except Exception:
                await asyncio.sleep(0.2)  # the API server is busy; try again
        print(f"  bench: gave up writing the status of pod {pod}", flush=True)

    async def settled(self, within: float) -> bool:
        """Every job Succeeded, all pods and services there, then QUIET seconds quiet."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            done = (
                len(self.succeeded_seen) >= self.jobs
                and len(self.pods) >= 4 * self.jobs
                and len(self.services) >= 4 * self.jobs
            )
            if done and time.perf_counter() - self.last_change >= QUIET:
                return True
            await asyncio.sleep(0.2)
        return False

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        print(f"  bench task failed: {task.exception()!r}", flush=True)


def _succeeded() -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
    return {
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "image": "registry.example/tf:2.16",
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        }
    }


# -- one run ---------------------------------------------------------------------------


@dataclass
class Result:
    operator: str
    jobs: int
    limit: str
    seconds: float = 0.0
    pods: int = 0
    services: int = 0
    status_writes: int = 0
    event_objects: int = 0
    event_occurrences: int = 0
    recorded: float = -1.0  # tfjob only: occurrences it recorded
    dropped: float = -1.0  # tfjob only
    running: list[float] = field(default_factory=list)
    succeeded: list[float] = field(default_factory=list)
    cpu: float = 0.0
    cpu_system: float = 0.0
    rss_mb: float = 0.0
    settled: bool = False
    stop_seconds: float = 0.0
    by_reason: dict[str, int] = field(default_factory=dict)  # Event occurrences


async def one_run(
    kind: str,
    jobs: int,
    qps: int,
    burst: int,
    folder: Path,
    profile: bool = False,
    baseline_src: str | None = None,
) -> Result:
    result = Result(kind, jobs, f"{qps}/{burst}")
    with control_plane(_crds()) as plane:
        client = KubeClient.connect(str(plane.kubeconfig_path))
        operator: Process | None = None
        try:
            await create_namespace(client, NAMESPACE)
            if kind == "tfjob":
                stats = folder / f"tfjob-{jobs}-{qps}.prof" if profile else None
                operator = start_tfjob(plane, qps, burst, folder, stats)
            elif kind == "baseline":
                operator = start_tfjob(plane, qps, burst, folder, src=baseline_src)
            elif kind.startswith("floor"):
                operator = start_floor(plane, qps, burst, folder, events=kind == "floor-events")
            else:
                operator = await start_kubeflow(client, plane, qps, burst, folder)
            sampler = asyncio.create_task(operator.sample_rss())
            await operator.ready()
            observer = Observer(client, jobs)
            await observer.start()
            await asyncio.sleep(0.5)
            operator.start_counting()
            started = time.perf_counter()
            await submit(client, jobs)
            result.settled = await observer.settled(within=600 + jobs)
            result.seconds = observer.last_change - started
            result.cpu = operator.cpu_used()
            result.cpu_system = operator.system_used()
            if kind in ("tfjob", "baseline"):
                found = operator.metrics()
                result.recorded = found.get("tfjob_events_recorded_total", 0.0)
                result.dropped = sum(
                    v for k, v in found.items() if k.startswith("tfjob_events_dropped_total")
                )
            result.stop_seconds = operator.stop()
            await sampler
            result.rss_mb = operator.peak_rss / 2**20
            await asyncio.sleep(1.0)  # anything flushed at shutdown reaches the watch
            await observer.close()
            result.pods, result.services = len(observer.pods), len(observer.services)
            result.status_writes = observer.status_writes
            result.event_objects = len(observer.event_counts)
            result.event_occurrences = sum(observer.event_counts.values())
            for name, count in observer.event_counts.items():
                reason = observer.event_reasons.get(name, "")
                result.by_reason[reason] = result.by_reason.get(reason, 0) + count
            result.running = _reactions(observer.running_written, observer.running_seen)
            result.succeeded = _reactions(observer.success_written, observer.succeeded_seen)
        finally:
            if operator is not None:
                operator.stop()
            await client.close()
            shutil_certs()
    return result


def shutil_certs() -> None:
    """Kubeflow's rotator writes its serving certificate here; leave no trace."""
    for path in CERT_DIR.glob("*"):
        with contextlib.suppress(OSError):
            path.unlink()


def _reactions(written: dict[str, float], seen: dict[str, float]) -> list[float]:
    return [(seen[j] - t) * 1000 for j, t in written.items() if j in seen and seen[j] >= t]


# -- the table -------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]  # type: ignore[call-overload, no-any-return]


def print_run(r: Result) -> None:
    lost = ""
    if r.operator in ("tfjob", "baseline"):
        verdict = "NONE LOST" if r.recorded == r.event_occurrences and not r.dropped else "LOST"
        lost = (
            f", recorded {r.recorded:.0f} occurrences, API holds {r.event_occurrences}, "
            f"dropped {r.dropped:.0f} -> {verdict}"
        )
    print(
        f"  {r.operator:8} {r.jobs:5} jobs @ {r.limit:9}: all work in {r.seconds:7.1f} s"
        f"{'' if r.settled else ' (NOT SETTLED)'}; pods {r.pods}, services {r.services}, "
        f"status writes {r.status_writes}, events {r.event_objects} objects / "
        f"{r.event_occurrences} occurrences{lost}; "
        f"Running reaction p50 {_pct(r.running, 50):.0f} ms p99 {_pct(r.running, 99):.0f} ms; "
        f"Succeeded reaction p50 {_pct(r.succeeded, 50):.0f} ms "
        f"p99 {_pct(r.succeeded, 99):.0f} ms; CPU {r.cpu:.1f} s (system {r.cpu_system:.1f}); "
        f"peak RSS {r.rss_mb:.0f} MB; "
        f"SIGTERM->exit {r.stop_seconds:.1f} s",
        flush=True,
    )
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(r.by_reason.items()))
    print(f"           Event occurrences by reason: {reasons}", flush=True)


def figures_of(r: Result) -> dict[str, Any]:
    """One run's figures as `record` writes them (bench/results.py)."""
    return {
        "time to all work, s": r.seconds,
        "settled": r.settled,
        "CPU, s": r.cpu,
        "Running reaction p50, ms": _pct(r.running, 50),
        "Running reaction p99, ms": _pct(r.running, 99),
        "Succeeded reaction p99, ms": _pct(r.succeeded, 99),
        "peak RSS, MB": r.rss_mb,
        "status writes": r.status_writes,
        "Event occurrences": r.event_occurrences,
        "Events dropped": r.dropped,
    }


def print_ratios(ours: Result, theirs: Result) -> None:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "n/a"

    rows = [
        ("time to all work", ours.seconds, theirs.seconds, "<= 0.5"),
        ("CPU seconds", ours.cpu, theirs.cpu, "<= 0.5"),
        ("Running reaction p50", _pct(ours.running, 50), _pct(theirs.running, 50), ""),
        ("Running reaction p99", _pct(ours.running, 99), _pct(theirs.running, 99), "< 1"),
        ("Succeeded reaction p99", _pct(ours.succeeded, 99), _pct(theirs.succeeded, 99), ""),
        ("peak RSS", ours.rss_mb, theirs.rss_mb, "<= 0.5 at 2,000 jobs"),
        ("status writes", ours.status_writes, theirs.status_writes, ""),
        ("Event occurrences", ours.event_occurrences, theirs.event_occurrences, ""),
    ]
    print(f"  {ours.operator}/Kubeflow, {ours.jobs} jobs x 4 workers @ {ours.limit}:")
    for name, a, b, goal in rows:
        print(f"    {name:24} {a:10.1f} / {b:10.1f} = {ratio(a, b):>6}  {goal}")


def _pin_assets() -> None:
    """Resolve the binaries once (build.sh may be busy later) and pin them for every
    control plane of the session through KUBEBUILDER_ASSETS."""
    for attempt in range(10):
        try:
            assets = find_assets(build=False)
        except Exception:
            if attempt == 9:
                raise
            time.sleep(5)
            continue
        os.environ["KUBEBUILDER_ASSETS"] = str(assets.folder)
        return


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--limits", nargs="+", default=["20:30", "1000:2000"])
    parser.add_argument(
        "--order",
        default=None,
        help="operators, in run order: kubeflow, tfjob, baseline (tfjob from "
        "--baseline-src), and floor / floor-events "
        "(bench/floor_operator.py: the required writes only, a floor to judge targets by); "
        "with --kind trainjob: trainer, tfjob (default kubeflow,tfjob; trainer,tfjob)",
    )
    parser.add_argument(
        "--kind",
        default="tfjob",
        choices=[*(k.scheme for k in FRAMEWORKS.values()), "trainjob"],
        help="the kind raced (PyTorchJob, XGBoostJob, PaddleJob: a Master and 3 Workers; "
        "trainjob: Kubeflow Trainer v2's TrainJob, bench/trainjob_race.py)",
    )
    parser.add_argument(
        "--baseline-src",
        help="another tree's src/ for the `baseline` operator (before/after in one run)",
    )
    parser.add_argument(
        "--every-kind",
        action="store_true",
        help="install every kind's CRD and let every operator serve every kind",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run tfjob under cProfile (slower: its figures are not comparable); stats "
        "in the logs folder, tfjob-<jobs>-<qps>.prof",
    )
    args = parser.parse_args()
    if args.kind == "trainjob":
        await race_trainjobs(args)
        return
    args.order = args.order or "kubeflow,tfjob"
    global WORKLOAD, EVERY_KIND
    EVERY_KIND = args.every_kind
    kind = next(k for k in FRAMEWORKS.values() if k.scheme == args.kind)
    WORKLOAD = Workload(kind, with_master=bool(kind.master_types) and kind.kind != "TFJob")
    _pin_assets()
    folder = Path(tempfile.mkdtemp(prefix="tfjob-race-"))
    print(f"logs in {folder}; {os.cpu_count()} CPUs; load {os.getloadavg()}", flush=True)
    table: list[tuple[Result, Result]] = []
    figures: dict[str, Any] = {}
    for jobs in args.jobs:
        for limit in args.limits:
            qps, burst = (int(x) for x in limit.split(":"))
            results: dict[str, Result] = {}
            for kind in args.order.split(","):
                results[kind] = await one_run(
                    kind, jobs, qps, burst, folder, args.profile, args.baseline_src
                )
                print_run(results[kind])
                label = f"{kind}, {jobs} jobs @ {limit}"
                if WORKLOAD.kind.kind != "TFJob":
                    label = f"{kind}, {jobs} {WORKLOAD.kind.kind}s @ {limit}"
                figures[label] = figures_of(results[kind])
            theirs = results.get("kubeflow")
            for ours in results.values():
                if theirs is not None and ours is not theirs:
                    table.append((ours, theirs))
                    print_ratios(ours, theirs)
    print("\nSummary (each against Kubeflow):")
    for ours, theirs in table:
        print_ratios(ours, theirs)

    from results import record  # bench/ is the script's folder, first on sys.path

    record("race_bench", figures)


async def race_trainjobs(args: argparse.Namespace) -> None:
    """`--kind trainjob`: bench/trainjob_race.py's race, its figures recorded here."""
    import trainjob_race  # type: ignore[import-not-found]

    _pin_assets()
    folder = Path(tempfile.mkdtemp(prefix="tfjob-race-"))
    print(f"logs in {folder}; {os.cpu_count()} CPUs; load {os.getloadavg()}", flush=True)
    order = (args.order or "trainer,tfjob").split(",")
    figures = await trainjob_race.race(
        args.jobs, args.limits, order, folder, control_plane, args.profile
    )

    from results import record

    record("race_bench", figures)


if __name__ == "__main__":
    asyncio.run(main())
