"""The series a Kubeflow dashboard reads beside the job counters: process_*, client-go's
work-queue timings and leader_election_master_status (no control plane needed; the
operator tests read the same registry over HTTP)."""

from __future__ import annotations

import asyncio

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue
from tfjob.runtimes.kubernetes.controller.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


NAME = (("name", "tfjob-controller"),)


async def test_work_queue_timings_show_a_stuck_worker_and_finished_work() -> None:
    metrics = Metrics()
    queue = WorkQueue(hooks=metrics.queue_hooks())
    queue.add("ns/a")
    await asyncio.sleep(0.02)
    assert await queue.get() == "ns/a"
    await asyncio.sleep(0.05)  # a worker at it for a while
    during = samples(metrics)
    assert during[("workqueue_unfinished_work_seconds", NAME)] >= 0.05
    assert during[("workqueue_longest_running_processor_seconds", NAME)] >= 0.05
    assert during[("workqueue_queue_duration_seconds_count", NAME)] == 1
    assert during[("workqueue_queue_duration_seconds_sum", NAME)] >= 0.02
    assert during[("workqueue_work_duration_seconds_count", NAME)] == 0

    queue.done("ns/a")
    after = samples(metrics)
    assert after[("workqueue_unfinished_work_seconds", NAME)] == 0
    assert after[("workqueue_longest_running_processor_seconds", NAME)] == 0
    assert after[("workqueue_work_duration_seconds_count", NAME)] == 1
    assert after[("workqueue_work_duration_seconds_sum", NAME)] >= 0.05


def test_process_series_are_exported() -> None:
    found = {name for name, _labels in samples(Metrics())}
    for name in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
    ):
        assert name in found


def test_leader_status_is_zero_until_the_lease_is_held() -> None:
    metrics = Metrics()
    assert not any(n == "leader_election_master_status" for n, _ in samples(metrics))
    report = metrics.leader_status("tfjob-operator")
    key = ("leader_election_master_status", (("name", "tfjob-operator"),))
    assert samples(metrics)[key] == 0
    report(True)
    assert samples(metrics)[key] == 1
    report(False)
    assert samples(metrics)[key] == 0
