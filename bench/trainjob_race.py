"""The TrainJob race (`race_bench.py --kind trainjob`): tfjob's operator against Kubeflow
Trainer v2.3.0's `trainer-controller-manager`, N TrainJobs each.

Each run gets a fresh control plane (the same kube-apiserver and etcd build), the real
JobSet controller v0.12.0 with its webhooks (testkit/jobset.py, at the race's client
limits), and one TrainJob controller: Trainer (testkit/trainer.py: its CRDs, its
webhooks, the runtimes it ships) or tfjob (`--enable-scheme=trainjob`, with tfjob's
manifests: testkit/trainjob_api.py), at the same client limits and the same number of
TrainJob workers (4). The bench submits N TrainJobs of the shipped
`torch-distributed` runtime (`numNodes: 2`) and times:
- until every JobSet exists (the operator's work: snapshot, JobSet applied, admitted);
- until every TrainJob shows Complete (the JobSet's completion read back), and of
  that, until every JobSet is Completed (the JobSet controller's part: one reconcile
  worker, it completes them at its own pace) and the operator's lag after it;
- per TrainJob, the spans created -> JobSet -> its Job -> (Job completed) -> JobSet
  Completed -> TrainJob Complete (p50, p90, max), the JobSets and Jobs made and
  completed per 10 s, the JobSet controller's writes and failed reconciles, and
  kube-apiserver's and etcd's CPU and request counts (decision 0038 reads them);
- the operator's CPU seconds (user+system) and peak RSS, and its TrainJob status writes.

TFJOB_RACE_TFJOB_LIMITS=qps:burst in the environment gives tfjob's operator its own
client limits (the JobSet controller keeps the race's): an experiment, pacing tfjob's
JobSets, not a race (decision 0038).

The bench plays the Job controller and the kubelet: kube-controller-manager, the
scheduler and kwok do not run, and every Job the JobSet controller creates gets a
completed status at once (both indexes succeeded), so the JobSet controller itself
marks the JobSet Completed, as it would when the pods end. Why not kwok running the
pods: at 2,000 TrainJobs that is 4,000 pods scheduled, bound and moved through their
phases by three more processes on the same 2 cores, work neither operator does
whose cost would only blur the two operators' figures (the v1 race plays the
kubelet the same way).

Trainer runs with its webhooks (its defaulting and validating webhooks are part of
its process, so its CPU includes admitting the TrainJobs); tfjob has none (its CRD's
CEL rules run in the API server).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import psutil
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

from testkit import trainjob_api
from testkit.controlplane import ControlPlane
from testkit.helpers import free_port
from testkit.jobset import JobSetManager
from testkit.trainer import TrainerManager
from testkit.trainjobs import trainjob
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import JOBSETS, TRAINJOBS, Resource

NAMESPACE = "race"
RUNTIME = "torch-distributed"
NODES = 2  # numNodes: one Job of 2 indexes per TrainJob
THREADS = 4
QUIET = 3.0
SUBMITTERS = 32
JOB_WRITERS = 16
JOBS = Resource("batch", "v1", "jobs")


# -- the processes -----------------------------------------------------------------------


class Usage:
    """CPU and peak RSS of one process, sampled."""

    def __init__(self, pid: int) -> None:
        self._ps = psutil.Process(pid)
        self.peak_rss = 0
        self._cpu0 = 0.0
        self._system0 = 0.0

    def cpu(self) -> float:
        times = self._ps.cpu_times()
        return float(times.user + times.system)

    def start_counting(self) -> None:
        self._cpu0 = self.cpu()
        self._system0 = float(self._ps.cpu_times().system)

    def cpu_used(self) -> float:
        return self.cpu() - self._cpu0

    def system_used(self) -> float:
        return float(self._ps.cpu_times().system) - self._system0

    async def sample_rss(self) -> None:
        while self._ps.is_running():
            try:
                self.peak_rss = max(self.peak_rss, self._ps.memory_info().rss)
            except psutil.Error:
                return
            await asyncio.sleep(0.1)


def child_running(binary: Path) -> int:
    """The pid of this process's child running `binary` (a manager testkit started)."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if Path(child.cmdline()[0]).resolve() == binary.resolve():
                return int(child.pid)
    raise RuntimeError(f"no child process runs {binary}")


class RaceJobSet(JobSetManager):
    """JobSet's manager at the race's client limits."""

    limits: tuple[int, int] = (100, 200)

    def configuration(self) -> dict[str, Any]:
        config = super().configuration()
        qps, burst = self.limits
        config["clientConnection"] = {"qps": qps, "burst": burst}
        return config


class RaceTrainer(TrainerManager):
    """Trainer's manager at the race's client limits and with the race's workers."""

    limits: tuple[int, int] = (50, 100)

    def configuration(self) -> dict[str, Any]:
        config = super().configuration()
        qps, burst = self.limits
        config["clientConnection"] = {"qps": qps, "burst": burst}
        config["controller"]["groupKindConcurrency"]["TrainJob.trainer.kubeflow.org"] = THREADS
        return config


class Tfjob:
    """`tfjob operator` serving TrainJobs in the race's namespace."""

    def __init__(
        self, plane: ControlPlane, qps: int, burst: int, log: Path, profile: Path | None = None
    ) -> None:
        self.health, self.metrics_port = free_port(), free_port()
        python = (
            [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
        )
        args = [
            *python, "-m", "tfjob", "operator",
            "--kubeconfig", str(plane.kubeconfig_path), "--namespace", NAMESPACE,
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health),
            "--kube-api-qps", str(qps), "--kube-api-burst", str(burst),
            "--bind-address", "127.0.0.1", "--workers", str(THREADS),
            "--enable-scheme=trainjob",
        ]  # fmt: skip
        with log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.log = log

    async def ready(self, within: float = 120.0) -> None:
        deadline = time.monotonic() + within
        url = f"http://127.0.0.1:{self.health}/readyz"
        while not _answers(url):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"tfjob not ready:\n{self.log.read_text()[-3000:]}")
            await asyncio.sleep(0.1)

    def counts(self) -> dict[str, float]:
        """Its reconciles, work-queue adds and API requests, from its metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        counts: dict[str, float] = {}
        for line in text.splitlines():
            name = line.split("{")[0].split(" ")[0]
            counted = name in _COUNTED and "trainjob" in line
            if counted or name == "rest_client_requests_total":
                key = line.rsplit(" ", 1)[0]
                counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
        return counts

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 40 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_COUNTED = ("controller_runtime_reconcile_total", "workqueue_adds_total")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


# -- watching, and playing the Job controller ---------------------------------------------


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Cond(msgspec.Struct):
    type: str
    status: str


class _Status(msgspec.Struct):
    conditions: list[_Cond] = []
    succeeded: int = 0


class _Spec(msgspec.Struct):
    completions: int = 1


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


class _Watch(msgspec.Struct):
    type: str
    object: _Obj


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""


class _List(msgspec.Struct):
    metadata: _ListMeta


@dataclass
class Watcher:
    """When each JobSet appeared and each TrainJob completed; the operator's status
    writes; every new Job completed at once."""

    client: KubeClient
    jobs: int
    jobsets: dict[str, float] = field(default_factory=dict)
    jobsets_completed: dict[str, float] = field(default_factory=dict)
    jobs_made: dict[str, float] = field(default_factory=dict)  # by JobSet: its Job ADDED
    jobs_done: dict[str, float] = field(default_factory=dict)  # by JobSet: its Job completed
    complete: dict[str, float] = field(default_factory=dict)
    status_writes: int = 0
    jobset_writes: int = 0  # JobSet MODIFIED events: the JobSet controller's writes
    last_change: float = 0.0
    job_writes_failed: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _writers: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(JOB_WRITERS))
    _finishing: set[str] = field(default_factory=set)

    async def start(self) -> None:
        for resource, handler in (
            (TRAINJOBS, self._trainjob),
            (JOBSETS, self._jobset),
            (JOBS, self._job),
        ):
            raw = await self.client.list(resource, NAMESPACE, limit=1)
            version = msgspec.json.decode(raw, type=_List).metadata.resourceVersion
            self._spawn(self._watch(resource, version, handler))

    async def _watch(self, resource: Resource, version: str, handler: Any) -> None:
        """Resume after the server ends a watch; a 410 is not expected in one run."""
        while True:
            try:
                async for line in self.client.watch(
                    resource, NAMESPACE, resource_version=version, timeout_seconds=600
                ):
                    event = msgspec.json.decode(line, type=_Watch)
                    if event.type == "ERROR":
                        raise RuntimeError(f"watch of {resource} expired")
                    version = event.object.metadata.resourceVersion or version
                    if event.type != "BOOKMARK":
                        handler(event)
            except (ApiError, TransportError):
                await asyncio.sleep(0.5)

    def _trainjob(self, event: _Watch) -> None:
        name = event.object.metadata.name
        if event.type == "MODIFIED":
            self.status_writes += 1
            self.last_change = time.perf_counter()
        complete = any(
            c.type == "Complete" and c.status == "True" for c in event.object.status.conditions
        )
        if complete:
            self.complete.setdefault(name, time.perf_counter())

    def _jobset(self, event: _Watch) -> None:
        name = event.object.metadata.name
        if event.type == "ADDED":
            self.jobsets.setdefault(name, time.perf_counter())
            self.last_change = time.perf_counter()
        elif event.type == "MODIFIED":
            self.jobset_writes += 1
        if any(
            c.type == "Completed" and c.status == "True" for c in event.object.status.conditions
        ):
            self.jobsets_completed.setdefault(name, time.perf_counter())

    def _job(self, event: _Watch) -> None:
        job = event.object
        if event.type == "ADDED" and job.metadata.name not in self._finishing:
            self.jobs_made.setdefault(_jobset_of(job.metadata.name), time.perf_counter())
            self._finishing.add(job.metadata.name)
            self._spawn(self._finish(job.metadata.name, job.spec.completions))

    async def _finish(self, name: str, completions: int) -> None:
        body = {"status": completed(completions)}
        async with self._writers:
            for _attempt in range(100):
                try:
                    await self.client.merge_patch(JOBS, NAMESPACE, name, body, "status")
                    self.jobs_done.setdefault(_jobset_of(name), time.perf_counter())
                    return
                except (ApiError, TransportError):
                    await asyncio.sleep(0.2)
        self.job_writes_failed += 1

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.append(task)

    async def settled(self, within: float) -> bool:
        """Every TrainJob Complete, then QUIET seconds without a status write."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if len(self.complete) >= self.jobs and time.perf_counter() - self.last_change >= QUIET:
                return True
            await asyncio.sleep(0.2)
        return False

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _jobset_of(job: str) -> str:
    """The JobSet of a Job JobSet made (`<jobset>-<replicated job>-<index>`)."""
    return job.rsplit("-", 2)[0]


def completed(completions: int) -> dict[str, Any]:
    """A finished Indexed Job's status, as the Job controller writes it once every
    index succeeded."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    indexes = "0" if completions == 1 else f"0-{completions - 1}"
    conditions = [
        {"type": kind, "status": "True", "reason": reason, "lastProbeTime": now,
         "lastTransitionTime": now}
        for kind, reason in (("SuccessCriteriaMet", "CompletionsReached"),
                             ("Complete", "CompletionsReached"))
    ]  # fmt: skip
    return {
        "startTime": now,
        "completionTime": now,
        "succeeded": completions,
        "completedIndexes": indexes,
        "uncountedTerminatedPods": {},
        "conditions": conditions,
    }


# -- one run -----------------------------------------------------------------------------


@dataclass
class Result:
    operator: str
    jobs: int
    limit: str
    submitted_seconds: float = 0.0  # every TrainJob created (admission: webhooks, CEL)
    jobsets_seconds: float = 0.0
    complete_seconds: float = 0.0
    # Every JobSet Completed (the JobSet controller's end: it completes them, the
    # operator only copies that); and the operator's lag after it.
    jobsets_completed_seconds: float = 0.0
    settled: bool = False
    cpu: float = 0.0
    cpu_system: float = 0.0
    rss_mb: float = 0.0
    status_writes: int = 0
    jobset_cpu: float = 0.0  # the JobSet controller's, for scale
    jobset_writes: int = 0  # its JobSet writes (MODIFIED events)
    apiserver_cpu: float = 0.0  # kube-apiserver's and etcd's, for scale
    etcd_cpu: float = 0.0
    slow_watchers: int = 0  # watches kube-apiserver closed: their reader was too slow
    # kube-apiserver's own count over the run, by what: requests and their seconds by
    # verb and resource, webhook calls, watch events sent (its /metrics).
    apiserver: dict[str, float] = field(default_factory=dict)
    jobset_errors: int = 0  # its "Reconciler error" log lines
    tfjob_counts: dict[str, float] = field(default_factory=dict)  # its metrics, tfjob's
    job_writes_failed: int = 0
    # Per TrainJob, seconds (p50, p90, max): created -> its JobSet made, its JobSet
    # made -> Completed (the JobSet controller's), Completed -> TrainJob Complete.
    latencies: dict[str, list[float]] = field(default_factory=dict)
    # JobSets made and Completed by each 10 s since the first TrainJob's creation.
    timeline: dict[str, list[int]] = field(default_factory=dict)


async def submit(client: KubeClient, count: int, created: dict[str, float] | None = None) -> None:
    gate = asyncio.Semaphore(SUBMITTERS)
    created = {} if created is None else created

    async def one(i: int) -> None:
        manifest = trainjob(f"t{i}", RUNTIME, num_nodes=NODES)
        manifest["metadata"]["namespace"] = NAMESPACE
        async with gate:
            for _attempt in range(50):
                try:
                    await client.create(TRAINJOBS, NAMESPACE, manifest)
                    created[f"t{i}"] = time.perf_counter()
                    return
                except TransportError:
                    await asyncio.sleep(0.2)

    await asyncio.gather(*(one(i) for i in range(count)))


async def one_run(
    operator: str,
    jobs: int,
    qps: int,
    burst: int,
    folder: Path,
    plane: ControlPlane,
    profile: bool = False,
) -> Result:
    """One operator's run on a fresh control plane (`plane`, started by the caller);
    with `profile`, tfjob under cProfile (its stats in `folder`)."""
    from operator_bench import create_namespace  # type: ignore[import-not-found]

    result = Result(operator, jobs, f"{qps}/{burst}")
    kube = Client(KubeConfig.from_file(plane.kubeconfig_path), field_manager="race-bench")
    client = KubeClient.connect(str(plane.kubeconfig_path))
    jobset = RaceJobSet(plane, kube, plane.assets.tool("jobset-controller-manager"))
    jobset.limits = (qps, burst)
    trainer: RaceTrainer | None = None
    tfjob: Tfjob | None = None
    spy: subprocess.Popen[bytes] | None = None
    try:
        await create_namespace(client, NAMESPACE)
        jobset.start()
        if operator == "trainer":
            trainer = RaceTrainer(plane, kube, plane.assets.tool("trainer-controller-manager"))
            trainer.limits = (qps, burst)
            trainer.start()
            usage = Usage(child_running(trainer.binary))
        else:
            trainjob_api.install(plane, kube)
            stats = folder / f"tfjob-trainjobs-{jobs}-{qps}.prof" if profile else None
            own = os.environ.get("TFJOB_RACE_TFJOB_LIMITS")  # an experiment: tfjob paced
            own_qps, own_burst = (int(x) for x in own.split(":")) if own else (qps, burst)
            tfjob = Tfjob(plane, own_qps, own_burst, folder / f"tfjob-{jobs}.log", stats)
            await tfjob.ready()
            usage = Usage(tfjob.process.pid)
            spy = _py_spy(tfjob.process.pid, folder / f"tfjob-trainjobs-{jobs}-{qps}.spy")
        jobset_usage = Usage(child_running(jobset.binary))
        plane_usage = [
            Usage(child_running(b)) for b in (plane.assets.kube_apiserver, plane.assets.etcd)
        ]
        sampler = asyncio.create_task(usage.sample_rss())
        watcher = Watcher(client, jobs)
        await watcher.start()
        await asyncio.sleep(0.5)
        usage.start_counting()
        jobset_usage.start_counting()
        for one in plane_usage:
            one.start_counting()
        server_before = await _server_counts(client)
        started = time.perf_counter()
        created: dict[str, float] = {}
        await submit(client, jobs, created)
        result.submitted_seconds = time.perf_counter() - started
        result.settled = await watcher.settled(within=600 + jobs)
        result.cpu, result.cpu_system = usage.cpu_used(), usage.system_used()
        result.jobset_cpu = jobset_usage.cpu_used()
        result.apiserver_cpu, result.etcd_cpu = (one.cpu_used() for one in plane_usage)
        result.rss_mb = usage.peak_rss / 2**20
        sampler.cancel()
        result.jobsets_seconds = max(watcher.jobsets.values(), default=started) - started
        result.complete_seconds = max(watcher.complete.values(), default=started) - started
        last = max(watcher.jobsets_completed.values(), default=started)
        result.jobsets_completed_seconds = last - started
        result.status_writes = watcher.status_writes
        result.jobset_writes = watcher.jobset_writes
        result.latencies, result.timeline = _spans(created, watcher, started)
        server_after = await _server_counts(client)
        result.apiserver = {
            k: v - server_before.get(k, 0.0)
            for k, v in server_after.items()
            if v - server_before.get(k, 0.0) >= 1
        }
        await _keep_samples(client, folder / f"{operator}-{jobs}")
        if tfjob is not None:
            result.tfjob_counts = tfjob.counts()
        result.job_writes_failed = watcher.job_writes_failed
        await watcher.close()
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        if tfjob is not None:
            tfjob.stop()
        if trainer is not None:
            trainer.stop()
        jobset.stop()
        kept = folder / f"jobset-{operator}-{jobs}.log"
        result.jobset_errors = await asyncio.to_thread(_keep_log, jobset.log_path, kept)
        kept = folder / f"kube-apiserver-{operator}-{jobs}.log"
        server_log = plane.log_dir / "kube-apiserver.log"
        result.slow_watchers = await asyncio.to_thread(
            _keep_log, server_log, kept, b"due to unresponsiveness"
        )
        await client.close()
        kube.close()
    return result


def _spans(
    created: dict[str, float], watcher: Watcher, started: float
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    def spread(pairs: list[float]) -> list[float]:
        if not pairs:
            return []
        pairs = sorted(pairs)
        return [pairs[len(pairs) // 2], pairs[int(len(pairs) * 0.9)], pairs[-1]]

    def between(a: dict[str, float], b: dict[str, float]) -> list[float]:
        return spread([b[name] - a[name] for name in a if name in b])

    latencies = {
        "created -> JobSet": between(created, watcher.jobsets),
        "JobSet -> Completed": between(watcher.jobsets, watcher.jobsets_completed),
        "JobSet -> its Job": between(watcher.jobsets, watcher.jobs_made),
        "Job completed -> JobSet Completed": between(watcher.jobs_done, watcher.jobsets_completed),
        "Completed -> Complete": between(watcher.jobsets_completed, watcher.complete),
    }

    def by_ten(times: dict[str, float]) -> list[int]:
        if not times:
            return []
        buckets = [0] * (int((max(times.values()) - started) // 10) + 1)
        for at in times.values():
            buckets[max(0, int((at - started) // 10))] += 1
        return buckets

    timeline = {
        "JobSets made": by_ten(watcher.jobsets),
        "their Jobs made": by_ten(watcher.jobs_made),
        "JobSets Completed": by_ten(watcher.jobsets_completed),
    }
    return latencies, timeline


async def _keep_samples(client: KubeClient, prefix: Path) -> None:
    """The first TrainJob and its JobSet as stored, for comparing the two operators'."""
    for resource, what in ((TRAINJOBS, "trainjob"), (JOBSETS, "jobset")):
        with contextlib.suppress(ApiError, TransportError):
            raw = await client.get(resource, NAMESPACE, "t0")
            await asyncio.to_thread(Path(f"{prefix}-{what}.json").write_bytes, raw)


_SERVER_SERIES = {
    "apiserver_request_total": ("verb", "resource"),
    "apiserver_request_duration_seconds_sum": ("verb", "resource"),
    "apiserver_admission_webhook_admission_duration_seconds_count": ("name",),
    "apiserver_watch_events_total": ("kind",),
    "apiserver_watch_events_sizes_sum": ("kind",),
}


async def _server_counts(client: KubeClient) -> dict[str, float]:
    """kube-apiserver's counters the race reads (`_SERVER_SERIES`), summed over the
    labels not named there."""
    try:
        text = (await client.get_path("/metrics")).decode()
    except (ApiError, TransportError):
        return {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("{")
        labels = _SERVER_SERIES.get(name)
        if labels is None or line.startswith("#"):
            continue
        found = dict(
            part.split("=", 1) for part in rest.rsplit("}", 1)[0].split(",") if "=" in part
        )
        key = name + "{" + ",".join(found.get(label, "").strip('"') for label in labels) + "}"
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def _keep_log(log: Path, kept: Path, counted: bytes = b"Reconciler error") -> int:
    """A log of the control plane's folder (it goes with it), kept beside the
    operators'; how many lines name `counted` (the JobSet controller's failed
    reconciles; the watches kube-apiserver closed as too slow to read)."""
    try:
        text = log.read_bytes()
    except OSError:
        return 0
    kept.write_bytes(text)
    return text.count(counted)


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """With TFJOB_RACE_PY_SPY=1 in the environment, py-spy sampling tfjob's operator
    (its collapsed stacks in `out`): a profile that barely slows the operator, unlike
    --profile's cProfile."""
    if os.environ.get("TFJOB_RACE_PY_SPY") != "1":
        return None
    args = ["py-spy", "record", "--pid", str(pid), "--rate", "50", "--format", "raw",
            "--output", str(out), "--nonblocking"]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_run(r: Result) -> None:
    print(
        f"  {r.operator:8} {r.jobs:5} TrainJobs @ {r.limit:9}: all created in "
        f"{r.submitted_seconds:6.1f} s, every JobSet in "
        f"{r.jobsets_seconds:6.1f} s, every TrainJob Complete in {r.complete_seconds:6.1f} s"
        f"{'' if r.settled else ' (NOT SETTLED)'}; status writes {r.status_writes}; "
        f"CPU {r.cpu:.1f} s (system {r.cpu_system:.1f}); peak RSS {r.rss_mb:.0f} MB; "
        f"JobSet controller CPU {r.jobset_cpu:.1f} s, JobSet writes {r.jobset_writes}, "
        f"errors {r.jobset_errors}; kube-apiserver CPU {r.apiserver_cpu:.1f} s, "
        f"etcd {r.etcd_cpu:.1f} s; slow watchers closed {r.slow_watchers}"
        + (f"; {r.job_writes_failed} Job writes FAILED" if r.job_writes_failed else ""),
        flush=True,
    )
    for name, spread in r.latencies.items():
        print(f"    {name:24} p50/p90/max " + " / ".join(f"{x:.1f}" for x in spread) + " s")
    for name, counts in r.timeline.items():
        print(f"    {name:18} per 10 s: {counts}")
    for name, value in sorted(r.apiserver.items(), key=lambda kv: -kv[1])[:24]:
        print(f"    kube-apiserver {name} {value:.1f}")
    for name, value in sorted(r.tfjob_counts.items()):
        print(f"    {name} {value:.0f}")


def figures_of(r: Result) -> dict[str, Any]:
    return {
        "time to create every TrainJob, s": r.submitted_seconds,
        "time to every JobSet, s": r.jobsets_seconds,
        "time to every TrainJob Complete, s": r.complete_seconds,
        "time to every JobSet Completed, s": r.jobsets_completed_seconds,
        "settled": r.settled,
        "CPU, s": r.cpu,
        "peak RSS, MB": r.rss_mb,
        "status writes": r.status_writes,
        "JobSet controller CPU, s": r.jobset_cpu,
        "JobSet controller's JobSet writes": r.jobset_writes,
        "JobSet controller's reconcile errors": r.jobset_errors,
        "kube-apiserver CPU, s": r.apiserver_cpu,
        "etcd CPU, s": r.etcd_cpu,
        "watches closed as too slow": r.slow_watchers,
        "kube-apiserver counts": r.apiserver,
        **{f"{name}, s (p50, p90, max)": spread for name, spread in r.latencies.items()},
        **{f"{name} per 10 s": counts for name, counts in r.timeline.items()},
    }


def print_ratios(ours: Result, theirs: Result) -> None:
    rows = [
        ("time to every JobSet", ours.jobsets_seconds, theirs.jobsets_seconds, "<= 1"),
        ("time to every Complete", ours.complete_seconds, theirs.complete_seconds, "<= 1"),
        (
            "  of which JobSet's",
            ours.jobsets_completed_seconds,
            theirs.jobsets_completed_seconds,
            "",
        ),
        (
            "  then the operator's",
            ours.complete_seconds - ours.jobsets_completed_seconds,
            theirs.complete_seconds - theirs.jobsets_completed_seconds,
            "<= 1",
        ),
        ("CPU seconds", ours.cpu, theirs.cpu, "<= 0.5"),
        ("peak RSS", ours.rss_mb, theirs.rss_mb, "<= 0.5"),
        ("status writes", ours.status_writes, theirs.status_writes, ""),
    ]
    print(f"  tfjob/Trainer, {ours.jobs} TrainJobs @ {ours.limit}:")
    for name, a, b, goal in rows:
        # A lag under a second either way is none: its ratio would be noise.
        lag = name.strip().startswith("then")
        ratio = f"{a / b:.2f}" if b and not (lag and max(a, b) < 1.0) else "n/a"
        print(f"    {name:24} {a:10.1f} / {b:10.1f} = {ratio:>6}  {goal}")


async def race(
    jobs: list[int],
    limits: list[str],
    order: list[str],
    folder: Path,
    control_plane: Any,
    profile: bool = False,
) -> dict[str, Any]:
    """Every size and limit, each operator of `order` on its own control plane (made by
    `control_plane()`, a context manager); the figures as `record` takes them."""
    figures: dict[str, Any] = {}
    table: list[tuple[Result, Result]] = []
    for count in jobs:
        for limit in limits:
            qps, burst = (int(x) for x in limit.split(":"))
            results: dict[str, Result] = {}
            for operator in order:
                with control_plane(()) as plane:
                    results[operator] = await one_run(
                        operator, count, qps, burst, folder, plane, profile
                    )
                print_run(results[operator])
                figures[f"{operator}, {count} TrainJobs @ {limit}"] = figures_of(results[operator])
            if "trainer" in results and "tfjob" in results:
                table.append((results["tfjob"], results["trainer"]))
                print_ratios(results["tfjob"], results["trainer"])
    print("\nSummary (tfjob against Trainer):")
    for ours, theirs in table:
        print_ratios(ours, theirs)
    return figures
