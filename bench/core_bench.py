"""How long the pure core takes to plan one reconcile of a 1,000-replica job.

A plan names the pods to create; their manifests are rendered by the runtime as it
creates them (`PodRenderer`, one per plan), so the plan itself is cheap; the "render
all manifests" line shows the cost a runtime pays as it creates the pods.

Targets (issue #2): <= 20 ms with all 1,000 pods observed running, and <= 20 ms with
nothing observed yet (1,000 pods and 1,000 services to create). The baseline, measured
in the same run, is msgspec-decoding the same 1,000 pods from JSON: the work a runtime
does anyway to observe them, so the ratio says what planning adds on top.

Run: python bench/core_bench.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.builders import job, pods, replica, services
from tfjob.api.observed import Pod
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import CreatePod
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings

REPLICAS = 1000
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def timed(fn: Callable[[], object], rounds: int = 15) -> tuple[float, float]:
    """Median and best wall time in milliseconds over `rounds` calls (after a warm-up)."""
    fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def main() -> None:
    tfjob = job(Worker=replica(REPLICAS - 2), PS=replica(1), Chief=replica(1))
    running = pods("worker", REPLICAS - 2) + pods("ps", 1) + pods("chief", 1)
    svcs = services("worker", REPLICAS - 2) + services("ps", 1) + services("chief", 1)
    encoded = msgspec.json.encode(running)
    settings = Settings()

    all_running = timed(lambda: reconcile(tfjob, running, svcs, NOW, settings))
    nothing_yet = timed(lambda: reconcile(tfjob, [], [], NOW, settings))
    baseline = timed(lambda: msgspec.json.decode(encoded, type=list[Pod]))

    def plan_and_render() -> None:
        # What a runtime does with the plan: render each manifest as it creates the pod.
        renderer = PodRenderer(tfjob, settings)
        for action in reconcile(tfjob, [], [], NOW, settings).actions:
            if isinstance(action, CreatePod):
                renderer.manifest(action)

    rendered = timed(plan_and_render, rounds=5)

    print(f"core plan, {REPLICAS} replicas (median / best of 15, ms)")
    for label, (median, best) in (
        ("all pods observed running", all_running),
        ("nothing observed yet", nothing_yet),
        ("nothing yet + render all manifests", rendered),
        ("baseline: decode the 1,000 pods", baseline),
    ):
        print(f"  {label:34s} {median:7.2f} / {best:7.2f}")
    for label, (median, _) in (("running", all_running), ("nothing yet", nothing_yet)):
        verdict = "meets" if median <= 20 else "MISSES"
        print(
            f"  {label}: {median / baseline[0]:.1f}x the decode baseline; "
            f"{verdict} the 20 ms target"
        )

    from results import record  # bench/ is the script's folder, first on sys.path

    record(
        "core_bench",
        {
            f"{label}, ms": {"median": median, "best": best}
            for label, (median, best) in (
                ("all pods observed running", all_running),
                ("nothing observed yet", nothing_yet),
                ("nothing yet + render all manifests", rendered),
                ("baseline: decode the 1,000 pods", baseline),
            )
        },
    )


if __name__ == "__main__":
    main()
