"""What the lifecycle series cost: per cache event, and per scrape as namespaces grow.

1. Handler cost: 10,000 TFJobs each passing the lifecycle's job handlers as the
   caches would show them (added, Created, Running, Succeeded, deleted: statuses the
   real core decided), microseconds per event.
2. Scrape size: one operator serving the six kinds, jobs in N namespaces, every
   lifecycle series touched; the series count, /metrics bytes and the time
   generate_latest takes, with the histograms labelled by `framework` only (as
   shipped) against the same histograms also labelled by `job_namespace`.

Run: python bench/metrics_bench.py [--namespaces 100]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry, Histogram, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench.results import record
from testkit.builders import advance, job, later, pod, replica, run
from tfjob.api.timestamps import rfc3339
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.controller.lifecycle import PHASES, JobLifecycle
from tfjob.runtimes.kubernetes.controller.metrics import DURATION_BUCKETS, Metrics

JOBS = 10_000


def _stages() -> list[TFJob]:
    """One job's statuses through its life, as the core wrote them."""
    first = job(Worker=replica(1))
    meta = msgspec.structs.replace(first.metadata, creation_timestamp=rfc3339(later(0)))
    stages = [msgspec.structs.replace(first, metadata=meta)]
    for seconds, observed in (
        (1, []),
        (5, [pod("worker", 0, "Running")]),
        (60, [pod("worker", 0, "Succeeded", exit_code=0)]),
    ):
        stages.append(advance(stages[-1], run(stages[-1], observed, now=later(seconds))))
    return stages


def handler_cost() -> float:
    """Microseconds per job event through the lifecycle's handlers."""
    stages = _stages()
    jobs = []
    for number in range(JOBS):
        meta = msgspec.structs.replace(stages[0].metadata, name=f"j{number}", uid=f"u{number}")
        jobs.append([msgspec.structs.replace(s, metadata=meta) for s in stages])
    handlers = JobLifecycle(TENSORFLOW, Metrics()).job_handlers()
    started = time.perf_counter()
    for life in jobs:
        handlers.on_add(life[0])
        for old, new in itertools.pairwise(life):
            handlers.on_update(old, new)
        handlers.on_delete(life[-1])
    events = JOBS * (len(stages) + 1)
    return (time.perf_counter() - started) / events * 1e6


def _touched(namespaces: int) -> Metrics:
    """Every lifecycle series of six kinds in `namespaces` namespaces."""
    metrics = Metrics()
    for framework in FRAMEWORKS.values():
        name = framework.metrics_name
        for number in range(namespaces):
            ns = f"team-{number}"
            for phase in PHASES:
                metrics.jobs.labels(job_namespace=ns, framework=name, phase=phase)
            for counter in (metrics.jobs_created, metrics.jobs_successful, metrics.jobs_failed):
                counter.labels(job_namespace=ns, framework=name).inc()
            for replica_type in framework.replica_types[:2]:
                metrics.job_restarts.labels(
                    job_namespace=ns, framework=name, replica_type=replica_type, reason="ExitCode"
                ).inc()
        once = (metrics.job_startup, metrics.job_resume_to_running, metrics.job_suspended)
        for histogram in once:
            histogram.labels(framework=name).observe(3)
        for histogram in (metrics.job_run, metrics.job_duration):
            for end in ("Succeeded", "Failed"):
                histogram.labels(framework=name, phase=end).observe(30)
    return metrics


def _with_namespace(namespaces: int) -> CollectorRegistry:
    """The same five histograms, labelled by namespace too."""
    registry = CollectorRegistry()
    names = ("startup", "resume_to_running", "suspended", "run", "duration")
    for name in names:
        extra = ["phase"] if name in ("run", "duration") else []
        histogram = Histogram(
            f"tfjob_job_{name}_seconds",
            name,
            ["framework", "job_namespace", *extra],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        for framework in FRAMEWORKS.values():
            for number in range(namespaces):
                ends = [{"phase": "Succeeded"}, {"phase": "Failed"}] if extra else [{}]
                for end in ends:
                    histogram.labels(
                        framework=framework.metrics_name, job_namespace=f"team-{number}", **end
                    ).observe(3)
    return registry


def scrape(registry: CollectorRegistry) -> dict[str, float]:
    text = generate_latest(registry)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        generate_latest(registry)
        times.append((time.perf_counter() - started) * 1000)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return {"series": series, "bytes": len(text), "generate_ms": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", type=int, default=100)
    args = parser.parse_args()
    cost = handler_cost()
    print(f"lifecycle handlers: {cost:.1f} us per job event ({JOBS} jobs, 5 events each)")
    shipped = scrape(_touched(args.namespaces).registry)
    by_namespace = scrape(_with_namespace(args.namespaces))
    for what, figures in (("shipped", shipped), ("histograms by namespace", by_namespace)):
        print(
            f"{what}, {args.namespaces} namespaces x 6 kinds: {figures['series']:.0f} series, "
            f"{figures['bytes'] / 1e6:.2f} MB, {figures['generate_ms']:.0f} ms to generate"
        )
    record(
        "metrics_bench",
        {
            "handler_us_per_event": cost,
            "namespaces": args.namespaces,
            "shipped": shipped,
            "histograms_also_by_namespace_alone": by_namespace,
        },
    )


if __name__ == "__main__":
    main()
