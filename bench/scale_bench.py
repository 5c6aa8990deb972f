"""`tfjob operator` at scale: memory and restart-to-ready with 10,000 TFJobs cached.

Runs on the test control plane (testkit/controlplane.py: real etcd and
kube-apiserver, no kubelet). Creating 80,000 pods and services through the operator
would take most of an hour on a 2-core machine, so this bench creates them itself:
each TFJob is POSTed, then its 4 pods and 4 services are rendered by the same core
the operator uses (`reconcile` + `PodRenderer`: the same labels and ownerReferences)
and POSTed, as `operator_bench.py`'s plain client does. The operator then only lists,
caches and reconciles them (it finds every pod and service present). Figures:

1. The operator's first start on the full cluster: RSS once synced (/readyz 200),
   peak RSS while it reconciles every job once (status writes included), RSS after.
   Goal at 10,000 jobs: <= 400 MB.
2. A restart: seconds from the process's start to /readyz 200, split into process
   start + imports, reading the kubeconfig, and list+decode per resource (from the
   operator's own log lines), and its RSS. Goal: <= 5 s.

With --baseline-src DIR (a checkout's `src`), the restart is also measured for that
tree on the same cluster, right after ours: same load, a before/after pair; each
--variant NAME=DIR adds one more tree, and every round restarts them all in turn.
Each restart also reports the CPU seconds etcd and kube-apiserver spent until
/readyz 200, which depends much less than wall time on what else the machine runs.
--ready-only stops each restart at /readyz 200 (no reconcile of every job after it),
--skip-first leaves out the first start (so the jobs carry no status).
Before each restart one pod, service and TFJob are written, as on a live cluster: the
API server serves a list's continued pages from its watch cache only while the
resource has recent changes, else from etcd (--idle: write nothing, measure that).

Populating takes minutes, so one cluster can serve several runs: --serve FILE sets
it up, writes where it is to FILE and keeps it until FILE is removed (or SIGINT);
--cluster FILE then restarts operators on it instead of making one (every bench run
under `flock`, the cluster left idle between them).

With --list-costs ROUNDS, before the operator starts, pods, services and TFJobs are
listed straight from this script in each of LIST_WAYS (page size, compression,
resourceVersion "0", metadata only; --ways picks some), in alternation: seconds, the
control plane's CPU, this script's CPU and the largest page.

With --cache-costs it only measures, in this process and without an API server, what
the operator's three caches hold per object (tracemalloc): the same objects as the
API server returns them, decoded by the operator's codecs into its informers with
their index (no handlers). Quick, and quiet-machine independent.

Run: python bench/scale_bench.py [--jobs 10000] [--baseline-src /tmp/base/src]
       [--restarts N] [--ready-only] [--skip-first] [--list-costs 2]
     python bench/scale_bench.py --serve /tmp/cluster.json [--jobs 10000] &
     python bench/scale_bench.py --cluster /tmp/cluster.json --skip-first --ready-only ...
     python bench/scale_bench.py --cache-costs [--jobs 2000]
The machine's load matters (2 cores shared by etcd, the API server, the operator and
this script); the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.operator_bench import (
    REPLICAS,
    control_plane,
    create_namespace,
    create_objects,
    tfjob,
)
from testkit.helpers import free_port
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import CreatePod, CreateService
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.cache.informer import Informer
from tfjob.runtimes.kubernetes.cache.shared import OWNER_INDEX, Owners
from tfjob.runtimes.kubernetes.transport.client import METADATA_LIST, KubeClient
from tfjob.runtimes.kubernetes.transport.decode import POD_CODEC, SERVICE_CODEC, Codec, JobDecoder
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    Resource,
    jobs_of,
    owned_by,
)

TFJOBS = jobs_of(TENSORFLOW)
OWNED_SELECTOR = owned_by(TENSORFLOW)
TFJOB_DECODER = JobDecoder(TFJob)

JOBS_IN_FLIGHT = 16  # jobs being populated at once (each with its 8 objects at once)
NAMESPACE = "bench-scale"
OURS = str(Path(__file__).resolve().parents[1] / "src")
MB = 2**20


def load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class Cpu:
    """CPU seconds used by some processes (etcd and kube-apiserver) since the last
    reading: unlike wall time, it hardly depends on what else the machine runs."""

    def __init__(self, pids: list[int]) -> None:
        self._processes = [psutil.Process(pid) for pid in pids]
        self._last = self._total()

    def _total(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self._processes)

    def since(self) -> float:
        now = self._total()
        used, self._last = now - self._last, now
        return used


class _Page(msgspec.Struct):
    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] = []


_page = msgspec.json.Decoder(_Page)


async def populate(client: KubeClient, jobs: int) -> None:
    """POST the TFJobs and, for each, the pods and services the core renders for it."""
    await create_namespace(client, NAMESPACE)
    settings = Settings()
    gate = asyncio.Semaphore(JOBS_IN_FLIGHT)
    done = 0
    started = time.perf_counter()

    async def one(i: int) -> None:
        nonlocal done
        async with gate:
            raw = await client.create(TFJOBS, NAMESPACE, tfjob(f"j{i}", NAMESPACE))
            await create_objects(client, NAMESPACE, raw, settings)
        done += 1
        if done % 1000 == 0:
            print(f"  {done} jobs populated, {time.perf_counter() - started:.0f} s, {load()}")

    await asyncio.gather(*(one(i) for i in range(jobs)))


class Operator:
    """`tfjob operator` as a subprocess with its health and metrics ports."""

    def __init__(self, kubeconfig: Path, log: Path, src: str) -> None:
        self.log = log
        self.health_port = free_port()
        self.metrics_port = free_port()
        env = {**os.environ, "PYTHONPATH": src}
        command = [
            sys.executable,
            "-m",
            "tfjob",
            "operator",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            NAMESPACE,
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            "--bind-address",
            "127.0.0.1",
            "--log-format",
            "json",
        ]
        self.started = time.time()
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self._ps = psutil.Process(self.process.pid)
        self.peak_rss = 0
        self._sampler = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        while self.process.poll() is None:
            with contextlib.suppress(psutil.Error):
                self.peak_rss = max(self.peak_rss, self._ps.memory_info().rss)
            await asyncio.sleep(0.05)

    def rss(self) -> int:
        return int(self._ps.memory_info().rss)

    def _get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""
        except OSError:
            return 0, ""

    async def ready(self, within: float = 600) -> float:
        """Poll /readyz every 10 ms; seconds from the process's start to the first 200."""
        deadline = time.monotonic() + within
        while True:
            code, _ = await asyncio.to_thread(self._get, self.health_port, "/readyz")
            if code == 200:
                return time.time() - self.started
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"operator not ready:\n{self.log.read_text()[-3000:]}")
            await asyncio.sleep(0.01)

    def metric(self, names: tuple[str, ...]) -> float:
        _, text = self._get(self.metrics_port, "/metrics")
        total = 0.0
        for line in text.splitlines():
            if line.startswith(names):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def quiet(self, within: float = 1200) -> float:
        """Wait until no reconcile has run for 5 s and nothing waits; seconds waited."""
        started = time.monotonic()
        last, since = -1.0, time.monotonic()
        while time.monotonic() - started < within:
            await asyncio.sleep(1)
            count = await asyncio.to_thread(self.metric, ("controller_runtime_reconcile_total{",))
            waiting = await asyncio.to_thread(
                self.metric, ("workqueue_depth{", "tfjob_events_pending ")
            )
            if count != last or waiting:
                last, since = count, time.monotonic()
            elif time.monotonic() - since >= 5:
                break
        return time.monotonic() - started

    async def quiet_then_stop(self) -> tuple[float, int]:
        """Wait until every job is reconciled (`quiet`), stop; the seconds of
        reconciling (the 5 quiet ones left out) and the RSS just before stopping."""
        waited = await self.quiet()
        after = self.rss()
        await self.stop()
        return waited - 5, after

    def print_phases(self, indent: str) -> None:
        for phase in self.phases():
            print(f"{indent}{phase}")

    async def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.process.wait, 60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        await self._sampler

    def phases(self) -> list[str]:
        """Start-up split from the operator's log: imports, kubeconfig, list+decode."""
        lines = []
        for raw in self.log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                lines.append(json.loads(raw))

        def at(entry: dict[str, Any]) -> float:
            return datetime.fromisoformat(entry["timestamp"]).timestamp() - self.started

        found = []
        for entry in lines:
            if entry.get("event") == "starting":
                kube = float(entry.get("kubeconfig_seconds", 0.0))
                found.append(f"process start + imports {at(entry) - kube:.2f} s")
                found.append(f"kubeconfig {kube:.2f} s")
            elif entry.get("event") == "listed":
                found.append(
                    f"{entry['resource']}: {entry['objects']} in {entry['pages']} pages, "
                    f"list+decode {entry['seconds']:.2f} s (decode {entry['decode_seconds']:.2f})"
                    f" done at {at(entry):.2f} s"
                )
            elif entry.get("event") == "caches synced":
                found.append(f"caches synced at {at(entry):.2f} s")
        return found


FIGURES: dict[str, Any] = {}  # what this run printed, for bench/results.py


async def restart(
    kubeconfig: Path,
    folder: Path,
    src: str,
    name: str,
    *,
    ready_only: bool = False,
    plane_cpu: Cpu | None = None,
) -> None:
    if plane_cpu:
        plane_cpu.since()
    operator = Operator(kubeconfig, folder / f"{name}.log", src)
    seconds = await operator.ready()
    at_ready = operator.rss()
    used = operator._ps.cpu_times()
    print(f"  {name}: ready {seconds:.2f} s after the process started (goal <= 5 s), {load()}")
    figures = FIGURES[name] = {"ready, s": seconds, "RSS at ready, MB": at_ready / MB}
    figures["operator CPU until ready, s"] = used.user + used.system
    if plane_cpu:
        figures["etcd + kube-apiserver CPU until ready, s"] = plane_cpu.since()
        print(
            f"    CPU until ready: etcd + kube-apiserver "
            f"{figures['etcd + kube-apiserver CPU until ready, s']:.2f} s, "
            f"operator {used.user + used.system:.2f} s"
        )
    operator.print_phases("    ")
    if ready_only:
        await operator.stop()
        figures["peak RSS, MB"] = operator.peak_rss / MB
        print(f"    RSS at ready {at_ready / MB:.0f} MB, peak {operator.peak_rss / MB:.0f} MB")
        return
    reconciling, after = await operator.quiet_then_stop()
    figures["peak RSS, MB"] = operator.peak_rss / MB
    print(
        f"    RSS at ready {at_ready / MB:.0f} MB; every job reconciled again in "
        f"{reconciling:.0f} s: {after / MB:.0f} MB, peak {operator.peak_rss / MB:.0f} MB"
    )


def served(jobs: int) -> dict[str, list[dict[str, Any]]]:
    """The objects as a list would return them: ids, versions, managedFields, status."""
    settings = Settings()
    version = 1000
    found: dict[str, list[dict[str, Any]]] = {"jobs": [], "pods": [], "services": []}

    def stored(meta: dict[str, Any]) -> None:
        nonlocal version
        version += 1
        meta.update(
            namespace=NAMESPACE,
            uid=str(uuid.uuid4()),
            resourceVersion=str(version),
            creationTimestamp="2026-12-01T08:00:00Z",
            managedFields=[{"manager": "tfjob", "operation": "Update", "fieldsType": "FieldsV1"}],
        )

    for i in range(jobs):
        document = tfjob(f"j{i}", NAMESPACE)
        stored(document["metadata"])
        job = msgspec.convert(document, TFJob)
        plan = reconcile(job, [], [], datetime.now(UTC), settings)
        document["status"] = msgspec.to_builtins(plan.status)
        found["jobs"].append(document)
        renderer = PodRenderer(job, settings)
        for action in plan.actions:
            if isinstance(action, CreatePod):
                pod = renderer.manifest(action)
                stored(pod["metadata"])
                pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
                found["pods"].append(pod)
            elif isinstance(action, CreateService):
                service = {**action.manifest, "metadata": dict(action.manifest["metadata"])}
                stored(service["metadata"])
                found["services"].append(service)
    return found


def cache_costs(jobs: int) -> None:
    """Bytes per cached object, by resource (tracemalloc), with the cache's index."""
    objects = served(jobs)
    pages = {
        name: [
            msgspec.json.encode({"metadata": {"resourceVersion": "5"}, "items": items[k : k + 500]})
            for k in range(0, len(items), 500)
        ]
        for name, items in objects.items()
    }
    del objects
    print(f"cache per object at {jobs} jobs x {REPLICAS} workers (tracemalloc), {load()}")
    codecs: list[tuple[str, Codec[Any], Resource]] = [
        ("jobs", TFJOB_DECODER.codec, TFJOBS),
        ("pods", POD_CODEC, PODS),
        ("services", SERVICE_CODEC, SERVICES),
    ]
    caches = []
    tracemalloc.start()
    for name, codec, resource in codecs:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        cache: Informer[Any] = Informer(None, resource, codec)  # type: ignore[arg-type]
        if name != "jobs":
            cache.add_index(OWNER_INDEX, Owners([TENSORFLOW]))
        items = [obj for body in pages[name] for obj in codec.decode_list(body)[0]]
        cache._replace(items)
        del items
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        caches.append(cache)
        print(f"  {name}: {len(cache)} cached, {held / MB:.1f} MB, {held / len(cache):.0f} B each")
        FIGURES[f"cache: {name}"] = {"MB": held / MB, "bytes each": held / len(cache)}
    tracemalloc.stop()


_PLAIN = {"Accept-Encoding": "identity"}
_METADATA = {"Accept": METADATA_LIST}
LIST_WAYS: list[tuple[str, dict[str, str], dict[str, str]]] = [
    # (name, extra query parameters, extra headers) of one paged list
    ("limit 500, gzip", {"limit": "500"}, {}),
    ("limit 500, uncompressed", {"limit": "500"}, _PLAIN),
    ("limit 2000, gzip", {"limit": "2000"}, {}),
    ("limit 2000, uncompressed", {"limit": "2000"}, _PLAIN),
    ("limit 5000, gzip", {"limit": "5000"}, {}),
    ("limit 10000, gzip", {"limit": "10000"}, {}),
    ("resourceVersion=0 limit 500, gzip", {"limit": "500", "resourceVersion": "0"}, {}),
    ("limit 500, metadata only, gzip", {"limit": "500"}, _METADATA),
    ("limit 2000, metadata only, gzip", {"limit": "2000"}, _METADATA),
    ("limit 2000, metadata only, uncompressed", {"limit": "2000"}, {**_METADATA, **_PLAIN}),
]


async def list_costs(
    client: KubeClient, rounds: int, plane_cpu: Cpu, ways: list[str] | None = None
) -> None:
    """Each way of listing pods, services and TFJobs, timed alone (one list at a time), in
    alternation: the seconds to the last page, the largest page, the pages; `ways`:
    only those whose names contain one of these."""
    session = client._session
    auth = await client._auth()
    print(f"3. one list at a time, {rounds} rounds in alternation (seconds to the last page)")
    for round_ in range(rounds):
        for resource in (PODS, SERVICES, TFJOBS):
            for name, params, headers in LIST_WAYS:
                if "metadata" in name and resource is not SERVICES:
                    continue
                if ways and not any(way in name for way in ways):
                    continue
                started, cpu = time.perf_counter(), time.process_time()
                plane_cpu.since()
                pages, largest, items, token = 0, 0, 0, ""
                while True:
                    query = {**params}
                    if resource is not TFJOBS:  # as the operator lists them
                        query["labelSelector"] = OWNED_SELECTOR
                    if token:
                        query["continue"] = token
                        query.pop("resourceVersion", None)
                    async with session.get(
                        client.server + resource.path(NAMESPACE),
                        params=query,
                        headers={**auth, **headers},
                    ) as answer:
                        body = await answer.read()
                    page = _page.decode(body)
                    pages += 1
                    largest = max(largest, len(body))
                    items += len(page.items)
                    token = page.metadata.get("continue", "")
                    if not token:
                        break
                FIGURES[f"list, round {round_ + 1}: {resource.plural} {name}"] = {
                    "seconds": time.perf_counter() - started,
                    "pages": pages,
                }
                print(
                    f"  round {round_ + 1} {resource.plural} {name}: {items} in {pages} pages, "
                    f"{time.perf_counter() - started:.2f} s, etcd + kube-apiserver CPU "
                    f"{plane_cpu.since():.2f} s, this client's CPU "
                    f"{time.process_time() - cpu:.2f} s, largest page {largest / MB:.1f} MB "
                    f"(uncompressed), {load()}"
                )


def variants_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The trees to restart in each round: ours, the baseline, each --variant."""
    variants = [("restart", OURS)]
    if args.baseline_src:
        variants.append(("baseline", args.baseline_src))
    for variant in args.variant or []:
        name, _, src = variant.partition("=")
        variants.append((name, src))
    return variants


def serve(args: argparse.Namespace) -> None:
    """Set a cluster up and keep it until the file naming it is removed (or SIGINT)."""
    where = Path(args.serve)
    with control_plane() as plane:
        print(f"control plane {plane.server}; {load()}", flush=True)
        started = time.perf_counter()
        asyncio.run(populate_at(plane.kubeconfig_path, args.jobs))
        print(f"  populated in {time.perf_counter() - started:.0f} s, {load()}", flush=True)
        where.write_text(json.dumps({"kubeconfig": str(plane.kubeconfig_path), "pids": plane.pids}))
        print(f"cluster described in {where}: remove that file to stop it", flush=True)
        while where.exists():
            time.sleep(1)


async def populate_at(kubeconfig: Path, jobs: int) -> None:
    client = KubeClient.connect(str(kubeconfig))
    try:
        await populate(client, jobs)
    finally:
        await client.close()


def on_cluster(args: argparse.Namespace) -> None:
    """Restarts on a cluster another run serves (--serve): no populating."""
    folder = Path(tempfile.mkdtemp(prefix="tfjob-scale-"))
    cluster = json.loads(Path(args.cluster).read_text())
    plane_cpu = Cpu(list(cluster["pids"].values()))
    print(f"cluster of {args.cluster}; logs in {folder}; {load()}")
    kubeconfig = Path(cluster["kubeconfig"])
    if args.list_costs:
        asyncio.run(list_costs_at(kubeconfig, args.list_costs, plane_cpu, args.ways))
    if args.restarts:
        asyncio.run(restarts(kubeconfig, folder, variants_of(args), args, plane_cpu))


async def list_costs_at(
    kubeconfig: Path, rounds: int, plane_cpu: Cpu, ways: list[str] | None
) -> None:
    client = KubeClient.connect(str(kubeconfig))
    try:
        await list_costs(client, rounds, plane_cpu, ways)
    finally:
        await client.close()


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="tfjob-scale-"))
    with control_plane() as plane:
        client = KubeClient.connect(str(plane.kubeconfig_path))
        print(f"control plane {plane.server}; logs in {folder}; {load()}")
        objects = args.jobs * REPLICAS
        print(
            f"populating {args.jobs} TFJobs x {REPLICAS} workers: {objects} pods + {objects} "
            "services created by this bench (rendered by the core), not by the operator"
        )
        started = time.perf_counter()
        await populate(client, args.jobs)
        print(f"  populated in {time.perf_counter() - started:.0f} s, {load()}")
        plane_cpu = Cpu(list(plane.pids.values()))
        if args.list_costs:
            await list_costs(client, args.list_costs, plane_cpu, args.ways)
        await client.close()
        variants = variants_of(args)
        if args.skip_first:
            await restarts(plane.kubeconfig_path, folder, variants, args, plane_cpu)
            return

        print("1. first start: list everything, reconcile every job once")
        first = Operator(plane.kubeconfig_path, folder / "first.log", OURS)
        seconds = await first.ready()
        synced = first.rss()
        print(f"  ready {seconds:.2f} s after the process started, {load()}")
        first.print_phases("    ")
        reconciling, after = await first.quiet_then_stop()
        FIGURES["first start"] = {
            "ready, s": seconds,
            "RSS synced, MB": synced / MB,
            "RSS after reconciling every job, MB": after / MB,
            "peak RSS, MB": first.peak_rss / MB,
        }
        print(
            f"  objects cached: {args.jobs} TFJobs, {objects} pods, {objects} services; "
            f"RSS synced {synced / MB:.0f} MB, after reconciling every job ({reconciling:.0f} s) "
            f"{after / MB:.0f} MB, peak {first.peak_rss / MB:.0f} MB (goal <= 400 MB), {load()}"
        )
        await restarts(plane.kubeconfig_path, folder, variants, args, plane_cpu)


async def touch(kubeconfig: Path, value: str) -> None:
    """Write one pod, service and TFJob (an annotation), as a live cluster's kubelets
    and controllers keep doing. The API server answers a list's continued pages from
    its watch cache only while it has recent changes of that resource; on a cluster
    idle for a few minutes, from etcd instead, decoding each object again (~2x the
    CPU for the pods' and services' lists at 10,000 jobs)."""
    client = KubeClient.connect(str(kubeconfig))
    try:
        for resource, name in ((PODS, "j0-worker-0"), (SERVICES, "j0-worker-0"), (TFJOBS, "j0")):
            patch = {"metadata": {"annotations": {"bench.tfjob/touched": value}}}
            await client.merge_patch(resource, NAMESPACE, name, patch)
    finally:
        await client.close()


async def restarts(
    kubeconfig: Path,
    folder: Path,
    variants: list[tuple[str, str]],
    args: argparse.Namespace,
    plane_cpu: Cpu,
) -> None:
    """Each tree restarted in turn, round after round (same cluster, alternating; the
    order reversed every other round).

    Each tree's modules are compiled to bytecode first, as installing tfjob does (pip,
    the image): with PYTHONDONTWRITEBYTECODE set, every start would compile them again
    (~0.07 s of CPU)."""
    for _name, src in variants:
        compile_all = [sys.executable, "-m", "compileall", "-q", src]
        await asyncio.to_thread(subprocess.run, compile_all, check=True)
    print(
        "2. restart: process start to /readyz 200"
        + (" (idle cluster)" if args.idle else " (one pod, service and TFJob touched before each)")
    )
    for round_ in range(args.restarts):
        # The first restart of a round tends to pay for a collection of the API
        # server's heap that the second then does not (docs/decisions/, record 0010):
        # every other round runs the trees in reverse order, so neither tree always
        # goes first.
        order = variants if round_ % 2 == 0 else variants[::-1]
        for name, src in order:
            if not args.idle:
                await touch(kubeconfig, f"{name}-{round_ + 1}")
            await restart(
                kubeconfig,
                folder,
                src,
                f"{name}-{round_ + 1}",
                ready_only=args.ready_only,
                plane_cpu=plane_cpu,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--restarts", type=int, default=1)
    parser.add_argument("--baseline-src", help="another tree's src/ to restart for comparison")
    parser.add_argument(
        "--variant", action="append", help="NAME=SRC: one more tree to restart in each round"
    )
    parser.add_argument(
        "--ready-only", action="store_true", help="restarts: stop at /readyz 200 (no reconciles)"
    )
    parser.add_argument(
        "--skip-first", action="store_true", help="no first start: only the restarts"
    )
    parser.add_argument(
        "--list-costs", type=int, default=0, help="ROUNDS of raw lists, each way (LIST_WAYS)"
    )
    parser.add_argument(
        "--ways", action="append", help="--list-costs: only the ways whose names hold this"
    )
    parser.add_argument(
        "--idle", action="store_true", help="restarts: touch nothing before each (see touch)"
    )
    parser.add_argument("--cache-costs", action="store_true", help="only the bytes per object")
    parser.add_argument("--serve", metavar="FILE", help="set a cluster up, keep it while FILE is")
    parser.add_argument("--cluster", metavar="FILE", help="restart on the cluster --serve made")
    arguments = parser.parse_args()
    if arguments.cache_costs:
        cache_costs(arguments.jobs)
    elif arguments.serve:
        serve(arguments)
    elif arguments.cluster:
        on_cluster(arguments)
    else:
        asyncio.run(main(arguments))
    if FIGURES:
        from results import record  # bench/ is the script's folder, first on sys.path

        record("scale_bench", {"jobs": arguments.jobs, **FIGURES})
