"""`tfjob operator` on a real API server: throughput, reaction time and memory.

Runs on the test control plane (testkit/controlplane.py: real etcd and
kube-apiserver, no kubelet; pod phases are written the way FakeKubelet does). Figures,
each with its baseline or goal:

1. Throughput - 200 TFJobs x 4 workers submitted at once: seconds until all 800 pods
   and 800 services exist. Baseline, same run, same machine: a plain async client
   that creates the same 200 TFJobs and the same 1,600 objects (rendered by the same
   core) with the same concurrency (4 jobs at a time, each job's 8 objects at once,
   like 4 workers). Goal: operator / plain <= 1.2. The operator also writes an Event
   per created object (and the job's own), which the plain client does not; so a
   second, equal-work baseline runs after the operator: the plain client again, now
   also POSTing the very Events the operator wrote for the burst (counted from the
   API server: same number, same bodies but for names) 4 at a time like the
   recorder, each job's Events queued as soon as its creates return. Both sides'
   Event counts and when their last Event was written are printed.
2. Reaction time - a pod's status change (worker 0 goes Running, written through
   pods/status as a kubelet would) until the TFJob's Running condition is seen on a
   watch, one job at a time: p50 and p99. Goal: p99 <= 100 ms.
3. Memory - peak RSS of the operator process (psutil) while it manages 2,000 TFJobs
   with 8,000 pods and 8,000 services, and after a restart with all of them listed
   at start-up. Goal: <= 150 MB.

With --client-costs it first shows why the client is built as it is: decoding a
5,000-pod list into our projection vs lightkube's models vs plain dicts, and the client
CPU of one create through httpx (lightkube's transport) vs our client (transport/http1.py).

Run: python bench/operator_bench.py [--jobs 200] [--memory-jobs 2000] [--skip-memory]
     [--client-costs] [--profile operator.prof] [--operator-src ../before/src]
The machine's load matters (2 cores shared by etcd, the API server, the operator and
this script): compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit import helpers
from testkit.controlplane import (
    MANIFESTS_BASE,
    ControlPlane,
    apply_documents,
    find_assets,
    load_manifest,
)
from testkit.helpers import free_port
from tfjob.core.objects import PodRenderer, pod_manifest
from tfjob.core.plan import CreatePod, CreateService
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.controller.events import SENDERS
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.decode import POD_CODEC, SERVICE_CODEC
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, SERVICES, jobs_of, owned_by

TFJOBS = jobs_of(TENSORFLOW)
OWNED_SELECTOR = owned_by(TENSORFLOW)

REPLICAS = 4
WORKERS = 4  # the operator's default, and the plain client's jobs in flight
SUBMITTERS = 8  # concurrent TFJob POSTs from the "user"


def tfjob(name: str, namespace: str) -> dict[str, Any]:
    specs = {"Worker": helpers.replica(REPLICAS)}
    return helpers.tfjob(name, namespace, specs, runPolicy={"cleanPodPolicy": "None"})


# -- plumbing --------------------------------------------------------------------------


@contextlib.contextmanager
def control_plane(crds: tuple[str, ...] = ("crd.yaml",)) -> Iterator[ControlPlane]:
    """A fresh control plane with these CRDs of manifests/base (TFJob's by default)."""
    plane = ControlPlane(find_assets(build=False))
    plane.start()
    try:
        from lightkube import Client
        from lightkube.config.kubeconfig import KubeConfig

        kube = Client(KubeConfig.from_file(plane.kubeconfig_path))
        for crd in crds:
            apply_documents(kube, load_manifest(MANIFESTS_BASE / crd))
        time.sleep(2)  # CRD established
        kube.close()
        yield plane
    finally:
        plane.stop()


class Operator:
    """`tfjob operator` as a subprocess, with its RSS sampled in the background."""

    profile: Path | None = None  # --profile: run the (first) operator under cProfile
    src: str | None = None  # --operator-src: the operator from another tree's src/

    def __init__(self, kubeconfig: Path, namespace: str, log: Path) -> None:
        self.log = log
        command = [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()"]
        if Operator.profile is not None:
            script = log.with_suffix(".py")
            script.write_text("from tfjob.interfaces.cli import main\nmain()\n")
            command = [sys.executable, "-m", "cProfile", "-o", str(Operator.profile), str(script)]
            Operator.profile = None
        self.metrics_port = free_port()
        args = [
            *command,
            "operator",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            "-1",
            "--bind-address",
            "127.0.0.1",
            "--workers",
            str(WORKERS),
        ]
        env = {**os.environ, "PYTHONPATH": Operator.src} if Operator.src else None
        with log.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.peak_rss = 0
        self._ps = psutil.Process(self.process.pid)

    async def sample_rss(self) -> None:
        while self.process.poll() is None:
            with contextlib.suppress(psutil.Error):
                self.peak_rss = max(self.peak_rss, self._ps.memory_info().rss)
            await asyncio.sleep(0.1)

    def _metrics(self) -> str:
        import urllib.request

        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())

    def events_pending(self) -> float:
        """Distinct Events recorded and not yet written (tfjob_events_pending)."""
        for line in self._metrics().splitlines():
            if line.startswith("tfjob_events_pending "):
                return float(line.split()[1])
        raise RuntimeError("no tfjob_events_pending in /metrics")

    async def events_written(self, within: float = 60) -> float:
        """perf_counter when no recorded Event was left pending (two readings in a row,
        50 ms apart: the last creates' Events are recorded as their answers arrive)."""
        deadline = time.monotonic() + within
        quiet: list[float] = []
        while len(quiet) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.events_pending()} Events still pending")
            quiet = [*quiet, time.perf_counter()] if not self.events_pending() else []
            await asyncio.sleep(0.05)
        return quiet[0]

    def requests(self) -> str:
        """The operator's API requests so far, by method and code (from /metrics)."""
        text = self._metrics()
        found = []
        for line in text.splitlines():
            if line.startswith("rest_client_requests_total{"):
                labels, value = line.rsplit(" ", 1)
                method = labels.split('method="')[1].split('"')[0]
                code = labels.split('code="')[1].split('"')[0]
                found.append(f"{method} {code}: {float(value):.0f}")
        return ", ".join(sorted(found))

    def rss(self) -> int:
        return int(self._ps.memory_info().rss)

    async def wait_synced(self, within: float = 120) -> None:
        deadline = time.monotonic() + within
        while b"caches synced" not in self.log.read_bytes():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"operator not synced:\n{self.log.read_text()[-2000:]}")
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


class Cpu:
    """CPU seconds used by each process of interest between two readings."""

    def __init__(self, processes: dict[str, int]) -> None:
        self._procs = {name: psutil.Process(pid) for name, pid in processes.items()}
        self._start = self._read()

    def _read(self) -> dict[str, float]:
        found = {}
        for name, proc in self._procs.items():
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                found[name] = times.user + times.system
        return found

    def used(self) -> str:
        now = self._read()
        parts = [f"{name} {now[name] - self._start.get(name, 0.0):.1f}" for name in now]
        return "CPU s: " + ", ".join(parts)


def plane_pids(plane: ControlPlane) -> dict[str, int]:
    return {
        "etcd": plane._etcd.pid,
        "apiserver": plane._apiserver.pid,  # type: ignore[union-attr]
        "bench": os.getpid(),
    }


async def create_namespace(client: KubeClient, name: str) -> None:
    from tfjob.runtimes.kubernetes.transport.resources import Resource

    await client.create(Resource("", "v1", "namespaces"), "", {"metadata": {"name": name}})


class Counter:
    """Pods and services with our label in a namespace, kept by two informers."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.pods = Informer(
            client, PODS, POD_CODEC, namespace=namespace, label_selector=OWNED_SELECTOR
        )
        self.services = Informer(
            client, SERVICES, SERVICE_CODEC, namespace=namespace, label_selector=OWNED_SELECTOR
        )
        self._tasks = [asyncio.create_task(i.run()) for i in (self.pods, self.services)]

    async def synced(self) -> None:
        await self.pods.synced.wait()
        await self.services.synced.wait()

    async def until(self, pods: int, services: int, within: float = 600) -> float:
        deadline = time.monotonic() + within
        while len(self.pods) < pods or len(self.services) < services:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.pods)} pods, {len(self.services)} services")
            await asyncio.sleep(0.005)
        return time.perf_counter()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def submit(client: KubeClient, namespace: str, count: int, prefix: str = "j") -> None:
    gate = asyncio.Semaphore(SUBMITTERS)

    async def one(i: int) -> None:
        async with gate:
            await client.create(TFJOBS, namespace, tfjob(f"{prefix}{i}", namespace))

    await asyncio.gather(*(one(i) for i in range(count)))


# -- 1. throughput ---------------------------------------------------------------------


Events = dict[str, list[dict[str, Any]]]  # job name -> the Events about it


async def operator_throughput(
    client: KubeClient, plane: ControlPlane, jobs: int, folder: Path
) -> tuple[float, Operator, str]:
    namespace = "bench-operator"
    await create_namespace(client, namespace)
    counter = Counter(client, namespace)
    await counter.synced()
    operator = Operator(plane.kubeconfig_path, namespace, folder / "operator.log")
    await operator.wait_synced()
    cpu = Cpu({**plane_pids(plane), "operator": operator.process.pid})
    started = time.perf_counter()
    await submit(client, namespace, jobs)
    done = await counter.until(jobs * REPLICAS, jobs * REPLICAS)
    print(f"  operator run {cpu.used()}")
    print(f"  operator requests during the run: {operator.requests()}")
    last = await operator.events_written()
    print(f"  operator: last Event of the burst written at {last - started:.2f} s")
    await counter.close()
    return done - started, operator, namespace


async def burst_events(client: KubeClient, namespace: str) -> Events:
    """The Events in `namespace` (all written: see above), by the job they are about."""
    found: Events = {}
    page = ""
    while True:
        listing = msgspec.json.decode(await client.list(EVENTS, namespace, continue_=page))
        for event in listing["items"]:
            found.setdefault(event["involvedObject"]["name"], []).append(event)
        if not (page := listing["metadata"].get("continue", "")):
            return found


def event_counts(events: Events) -> str:
    items = [e for about in events.values() for e in about]
    reasons: dict[str, int] = {}
    for e in items:
        reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    listed = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items()))
    occurrences = sum(int(e.get("count", 1)) for e in items)
    return f"{len(items)} Event objects ({occurrences} occurrences: {listed})"


def event_body(model: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """`model` (one of the operator's Events) about the plain client's `job`: the same
    fields and size, its own name, namespace and involved object."""
    meta = job["metadata"]
    body = {k: v for k, v in model.items() if k not in ("metadata", "eventTime", "series")}
    body["metadata"] = {
        "name": f"{meta['name']}.{time.time_ns():x}",
        "namespace": meta["namespace"],
    }
    body["involvedObject"] = {
        **model["involvedObject"],
        "namespace": meta["namespace"],
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
    }
    return body


async def create_objects(
    client: KubeClient, namespace: str, raw: bytes, settings: Settings
) -> None:
    """A job's pods and services as the operator would create them (the same core
    renders them), all at once: the plain client's share of a job."""
    job = msgspec.json.decode(raw, type=TFJob)
    plan = reconcile(job, [], [], datetime.now(UTC), settings)
    pods = PodRenderer(job, settings)
    await asyncio.gather(
        *(
            client.create(PODS, namespace, pods.manifest(a))
            if isinstance(a, CreatePod)
            else client.create(SERVICES, namespace, a.manifest)
            for a in plan.actions
            if isinstance(a, CreatePod | CreateService)
        )
    )


async def plain_throughput(
    client: KubeClient,
    plane: ControlPlane,
    jobs: int,
    namespace: str = "bench-plain",
    events: Events | None = None,
) -> tuple[float, float]:
    """The same work without an operator: the "user" submits TFJobs (8 at a time, as
    in the operator run) and 4 consumers create each submitted job's 8 objects at once,
    straight from the POST responses - no cache, no status writes. With `events`, each
    job's Events are queued once its creates return and SENDERS tasks POST them (the
    recorder's concurrency); otherwise none. Seconds until every pod and service
    exists, and until the last Event was written."""
    await create_namespace(client, namespace)
    counter = Counter(client, namespace)
    await counter.synced()
    settings = Settings()
    submitted: asyncio.Queue[bytes | None] = asyncio.Queue()
    to_send: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    gate = asyncio.Semaphore(SUBMITTERS)

    async def submit_one(i: int) -> None:
        async with gate:
            await submitted.put(await client.create(TFJOBS, namespace, tfjob(f"j{i}", namespace)))

    async def consume() -> None:
        while (raw := await submitted.get()) is not None:
            await create_objects(client, namespace, raw, settings)
            if events is not None:
                wire = msgspec.json.decode(raw)
                for model in events.get(wire["metadata"]["name"], []):
                    to_send.put_nowait(event_body(model, wire))

    async def send() -> None:
        while (body := await to_send.get()) is not None:
            await client.create(EVENTS, namespace, body)

    cpu = Cpu(plane_pids(plane))
    started = time.perf_counter()
    consumers = [asyncio.create_task(consume()) for _ in range(WORKERS)]
    senders = [asyncio.create_task(send()) for _ in range(SENDERS if events else 0)]
    await asyncio.gather(*(submit_one(i) for i in range(jobs)))
    for _ in consumers:
        await submitted.put(None)
    await asyncio.gather(*consumers)
    done = await counter.until(jobs * REPLICAS, jobs * REPLICAS)
    print(f"  plain run{' with Events' if events else ''} {cpu.used()}")
    for _ in senders:
        to_send.put_nowait(None)
    await asyncio.gather(*senders)
    written = time.perf_counter()
    await counter.close()
    return done - started, written - started


# -- 2. reaction time ------------------------------------------------------------------


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "containerStatuses": [
                {
                    "name": "tensorflow",
                    "image": "registry.example/tf:2.16",
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
    }


class _Cond(msgspec.Struct):
    type: str
    status: str


class _JobStatus(msgspec.Struct):
    conditions: list[_Cond] = []


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""  # wire name


class _Job(msgspec.Struct):
    metadata: _Meta
    status: _JobStatus = msgspec.field(default_factory=_JobStatus)


class _Event(msgspec.Struct):
    type: str
    object: _Job


async def reaction_times(client: KubeClient, namespace: str, samples: int) -> list[float]:
    """Milliseconds from a pod status write to the job's Running condition on a watch."""
    seen: dict[str, float] = {}
    waiting: dict[str, asyncio.Future[float]] = {}
    listing = msgspec.json.decode(await client.list(TFJOBS, namespace, limit=0))
    version = listing["metadata"]["resourceVersion"]

    async def watch() -> None:
        async for line in client.watch(
            TFJOBS, namespace, resource_version=version, timeout_seconds=600
        ):
            event = msgspec.json.decode(line, type=_Event)
            name = event.object.metadata.name
            if any(
                c.type == "Running" and c.status == "True" for c in event.object.status.conditions
            ):
                seen.setdefault(name, time.perf_counter())
                future = waiting.pop(name, None)
                if future is not None and not future.done():
                    future.set_result(seen[name])

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.5)
    results = []
    loop = asyncio.get_running_loop()
    for i in range(samples):
        name = f"j{i}"
        future: asyncio.Future[float] = loop.create_future()
        waiting[name] = future
        started = time.perf_counter()
        await client.merge_patch(
            PODS, namespace, f"{name}-worker-0", running_status({}), subresource="status"
        )
        finished = await asyncio.wait_for(future, 10)
        results.append((finished - started) * 1000)
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    return results


# -- 3. memory -------------------------------------------------------------------------


async def memory(client: KubeClient, kubeconfig: Path, jobs: int, folder: Path) -> dict[str, float]:
    namespace = "bench-memory"
    await create_namespace(client, namespace)
    counter = Counter(client, namespace)
    await counter.synced()
    operator = Operator(kubeconfig, namespace, folder / "memory.log")
    sampler = asyncio.create_task(operator.sample_rss())
    await operator.wait_synced()
    base = operator.rss()
    started = time.perf_counter()
    await submit(client, namespace, jobs)
    await counter.until(jobs * REPLICAS, jobs * REPLICAS, within=1800)
    elapsed = time.perf_counter() - started
    await asyncio.sleep(3)  # let status writes and events settle
    steady = operator.rss()
    operator.stop()
    await sampler
    print(
        f"  {jobs} jobs, {jobs * REPLICAS} pods + {jobs * REPLICAS} services created in "
        f"{elapsed:.1f} s by the operator"
    )
    print(
        f"  RSS: {base / 2**20:.0f} MB empty, {steady / 2**20:.0f} MB managing all, "
        f"peak {operator.peak_rss / 2**20:.0f} MB (goal <= 150 MB)"
    )

    restarted = Operator(kubeconfig, namespace, folder / "memory-restart.log")
    sampler = asyncio.create_task(restarted.sample_rss())
    await restarted.wait_synced(within=300)
    await asyncio.sleep(3)
    after = restarted.rss()
    restarted.stop()
    await sampler
    synced = [
        line
        for line in (folder / "memory-restart.log").read_text().splitlines()
        if "caches synced" in line
    ]
    print(
        f"  after a restart (everything listed at start): {after / 2**20:.0f} MB, "
        f"peak {restarted.peak_rss / 2**20:.0f} MB; {synced[0] if synced else ''}"
    )
    await counter.close()
    return {
        "jobs": jobs,
        "created by the operator, s": elapsed,
        "RSS empty, MB": base / 2**20,
        "RSS managing all, MB": steady / 2**20,
        "peak RSS, MB": operator.peak_rss / 2**20,
        "RSS after a restart, MB": after / 2**20,
        "peak RSS after a restart, MB": restarted.peak_rss / 2**20,
    }


# -- 0. why this client: decoding and per-request cost ------------------------------


def realistic_pod(i: int) -> dict[str, Any]:
    """A pod as the API server returns it for a 4-worker job (managedFields included)."""
    job = msgspec.json.decode(msgspec.json.encode(tfjob("j", "ns")), type=TFJob)
    job.metadata.uid = "0b5c6f0e-5a8e-4d4e-9f43-7a6f5c1d2e3f"
    plan = reconcile(job, [], [], datetime.now(UTC), Settings())
    create = next(a for a in plan.actions if isinstance(a, CreatePod))
    pod: dict[str, Any] = pod_manifest(job, create, Settings())
    now = "2026-01-01T00:00:00Z"
    pod["metadata"].update(
        name=f"j{i}-worker-0",
        uid=f"uid-{i}",
        resourceVersion=str(1000 + i),
        creationTimestamp=now,
        managedFields=[
            {
                "manager": "tfjob-operator",
                "operation": "Update",
                "apiVersion": "v1",
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {f"f:{k}": {} for k in pod["metadata"]["labels"]}},
                    "f:spec": {"f:containers": {'k:{"name":"tensorflow"}': {}}},
                },
            }
        ],
    )
    pod["spec"].update(
        dnsPolicy="ClusterFirst",
        schedulerName="default-scheduler",
        terminationGracePeriodSeconds=30,
        enableServiceLinks=True,
        priority=0,
        securityContext={},
        serviceAccountName="default",
        nodeName="node-1",
        tolerations=[
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
    )
    pod["status"] = running_status({})["status"] | {
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        "hostIP": "10.0.0.1",
        "podIP": f"10.1.{i // 250}.{i % 250}",
        "qosClass": "BestEffort",
    }
    return pod


def decode_costs(pods: int = 5000) -> None:
    import gc
    import tracemalloc

    from lightkube.core import decoders
    from lightkube.resources.core_v1 import Pod as LightkubePod

    body = msgspec.json.encode(
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "9"},
            "items": [realistic_pod(i) for i in range(pods)],
        }
    )
    ways = {
        "msgspec into tfjob's projection": lambda: POD_CODEC.decode_list(body),
        "lightkube 1.x models": lambda: decoders.decode_list(body, LightkubePod),
        "plain dicts (msgspec, untyped)": lambda: msgspec.json.decode(body),
    }
    print(f"0. decoding a PodList of {pods} pods ({len(body) / 2**20:.1f} MB of JSON)")
    for name, decode in ways.items():
        best = min(_timed(decode) for _ in range(3))
        gc.collect()
        tracemalloc.start()
        kept = decode()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del kept
        print(f"  {name}: {best * 1000:.0f} ms, {size / 2**20:.0f} MB kept")


def _timed(work: Any) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


async def request_costs(kubeconfig: Path, count: int = 1000) -> None:
    """Client CPU per create, httpx (what lightkube uses) vs ours (transport/http1.py)."""
    import resource as rusage

    import httpx2
    from lightkube.config import client_adapter
    from lightkube.config.kubeconfig import KubeConfig

    def cpu() -> float:
        usage = rusage.getrusage(rusage.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def body(i: int, tag: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{tag}-{i}"},
            "data": {"a": "x" * 500},
        }

    ns = "bench-requests"
    ours = KubeClient.connect(str(kubeconfig))
    await create_namespace(ours, ns)
    single = KubeConfig.from_file(kubeconfig).get()
    assert single is not None
    params = client_adapter.ConnectionParams()
    httpx = httpx2.AsyncClient(
        **params.httpx_params(single), limits=httpx2.Limits(max_keepalive_connections=64)
    )
    path = f"/api/v1/namespaces/{ns}/configmaps"
    gate = asyncio.Semaphore(32)

    async def via_httpx(i: int) -> None:
        async with gate:
            answer = await httpx.post(
                path,
                content=msgspec.json.encode(body(i, "hx")),
                headers={"Content-Type": "application/json"},
            )
            assert answer.status_code == 201

    async def via_ours(i: int) -> None:
        from tfjob.runtimes.kubernetes.transport.resources import Resource

        async with gate:
            await ours.create(Resource("", "v1", "configmaps"), ns, body(i, "ah"))

    print(f"0b. client CPU for {count} creates, 32 at a time")
    for name, one in (
        ("httpx (lightkube's transport)", via_httpx),
        ("ours (http1.py)", via_ours),
    ):
        started, used = time.perf_counter(), cpu()
        await asyncio.gather(*(one(i) for i in range(count)))
        print(
            f"  {name}: {time.perf_counter() - started:.2f} s, {cpu() - used:.2f} s CPU "
            f"({(cpu() - used) / count * 1000:.2f} ms per request)"
        )
    await httpx.aclose()
    await ours.close()


# -- main ------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="tfjob-bench-"))
    with control_plane() as plane:
        client = KubeClient.connect(str(plane.kubeconfig_path))
        print(f"control plane {plane.server}; logs in {folder}; load avg {os.getloadavg()}")
        if args.client_costs:
            decode_costs()
            await request_costs(plane.kubeconfig_path)

        print(f"1. {args.jobs} TFJobs x {REPLICAS} workers submitted at once")
        plain, _ = await plain_throughput(client, plane, args.jobs)
        seconds, operator, namespace = await operator_throughput(client, plane, args.jobs, folder)
        written = await burst_events(client, namespace)
        print(f"  operator wrote for the burst: {event_counts(written)}")
        equal, equal_events = await plain_throughput(
            client, plane, args.jobs, "bench-plain-events", written
        )
        copied = await burst_events(client, "bench-plain-events")
        print(f"  plain client with Events wrote: {event_counts(copied)}")
        print(f"  plain client with Events: last Event written at {equal_events:.2f} s")
        print(
            f"  operator: {seconds:.2f} s until {args.jobs * REPLICAS} pods and "
            f"{args.jobs * REPLICAS} services exist"
        )
        print(f"  plain client, same objects, same concurrency: {plain:.2f} s")
        print(f"  plain client, same objects and the same Events: {equal:.2f} s")
        print(f"  ratio operator/plain: {seconds / plain:.2f} (goal <= 1.2)")
        print(f"  equal-work ratio operator/plain with Events: {seconds / equal:.2f}")

        await asyncio.sleep(3)  # status writes and events of the burst settle
        print(f"2. pod status change -> job condition, {args.samples} jobs one at a time")
        times = sorted(await reaction_times(client, namespace, args.samples))
        p50 = statistics.median(times)
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(f"  p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {times[-1]:.1f} ms (goal p99 <= 100 ms)")
        operator.stop()
        figures: dict[str, Any] = {
            "burst": {
                "jobs": args.jobs,
                "operator, s": seconds,
                "plain client, s": plain,
                "plain client with the same Events, s": equal,
                "ratio operator/plain": seconds / plain,
                "equal-work ratio operator/plain with Events": seconds / equal,
            },
            "reaction": {"samples": args.samples, "p50, ms": p50, "p99, ms": p99},
        }

        if not args.skip_memory:
            print(f"3. memory with {args.memory_jobs} jobs")
            figures["memory"] = await memory(
                client, plane.kubeconfig_path, args.memory_jobs, folder
            )
        await client.close()

    from results import record  # bench/ is the script's folder, first on sys.path

    record("operator_bench-baseline" if args.operator_src else "operator_bench", figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--memory-jobs", type=int, default=2000)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument(
        "--client-costs", action="store_true", help="also measure decoding and per-request CPU"
    )
    parser.add_argument("--profile", type=Path, help="cProfile output of the operator")
    parser.add_argument(
        "--operator-src",
        help="run the operator from another tree's src/ (a before/after baseline; its "
        "results are recorded as operator_bench-baseline)",
    )
    arguments = parser.parse_args()
    Operator.profile = arguments.profile
    Operator.src = arguments.operator_src
    asyncio.run(main(arguments))
