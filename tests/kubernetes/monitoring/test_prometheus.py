"""Every series docs/metrics.md lists, read through a real Prometheus that scraped a
real operator while jobs of five kinds ran, succeeded, failed, restarted, waited
suspended and were deleted (the `scenario` fixture, conftest.py). Each value is what
the jobs' own statuses (as the API server stored them) and the scenario's story say it
must be, queried with PromQL over Prometheus' HTTP API.

The last test restarts an operator under Prometheus and checks that the new process
neither counts nor times the jobs it finds again (docs/metrics.md, "A restarted
operator").
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, KwokPods
from testkit.helpers import WaitTimeout, replica, wait_for
from testkit.operators import Jobs, Operators
from testkit.prometheus import JOB, Prometheus, Scenario
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.controller.lifecycle import PHASES

DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
KINDS = ("tensorflow", "pytorch", "jax", "xgboost", "paddle")  # the scenario's
# Every kind the operator serves: its series of the scenario's namespace start at 0
# with the operator (limited to that namespace), whether or not a job of it ran.
SERVED = tuple(f.metrics_name for f in FRAMEWORKS.values())
CONTROLLERS = tuple(f.controller_name for f in FRAMEWORKS.values() if f.metrics_name in KINDS)

# What this file checks: every name docs/metrics.md lists (test_the_docs_list_...).
CHECKED = {
    "training_operator_jobs_created_total",
    "training_operator_jobs_successful_total",
    "training_operator_jobs_failed_total",
    "training_operator_jobs_restarted_total",
    "training_operator_jobs_deleted_total",
    "tfjob_jobs",
    "tfjob_job_startup_seconds",
    "tfjob_job_resume_to_running_seconds",
    "tfjob_job_suspended_seconds",
    "tfjob_job_run_seconds",
    "tfjob_job_duration_seconds",
    "tfjob_job_restarts_total",
    "tfjob_build_info",
    "created_pods_total",
    "deleted_pods_total",
    "failed_pods_total",
    "succeeded_service_creation_total",
    "failed_service_creation_total",
    "created_pod_groups_total",
    "deleted_pod_groups_total",
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_reconcile_time_seconds",
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_retries_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "rest_client_requests_total",
    "leader_election_master_status",
    "process_*",
    "tfjob_events_recorded_total",
    "tfjob_event_writes_total",
    "tfjob_event_write_retries_total",
    "tfjob_events_pending",
    "tfjob_events_dropped_total",
}
PROCESS = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
)


def documented() -> set[str]:
    """The names in the first column of docs/metrics.md's tables."""
    names: set[str] = set()
    for line in DOCS.read_text().splitlines():
        cells = line.split("|")
        if len(cells) > 2 and cells[1].strip().startswith("`"):
            names |= set(re.findall(r"`([a-z_*]+)`", cells[1]))
    return names


def test_the_docs_list_exactly_the_series_checked_here() -> None:
    assert documented() == CHECKED


# -- reading the jobs' statuses ---------------------------------------------------------------


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _since_created(job: dict[str, Any], condition_type: str) -> float:
    created = _stamp(job["metadata"]["creationTimestamp"])
    return (_when(job, condition_type) - created).total_seconds()


def _when(job: dict[str, Any], condition_type: str) -> datetime:
    for condition in job["status"]["conditions"]:
        if condition["type"] == condition_type:
            return _stamp(condition["lastTransitionTime"])
    raise AssertionError(f"no {condition_type} condition on {job['metadata']['name']}")


def _end(job: dict[str, Any]) -> str:
    types = {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"}
    return "Succeeded" if "Succeeded" in types else "Failed"


# -- reading Prometheus --------------------------------------------------------------------


class Reader:
    """PromQL on the scenario's operator (its `instance`) and namespace."""

    def __init__(self, scenario: Scenario) -> None:
        self.prometheus = scenario.prometheus
        self.operator = f'instance="{scenario.instance}"'
        self.jobs = f'{self.operator},job_namespace="{scenario.namespace}"'

    def by(self, expr: str, *labels: str) -> dict[tuple[str, ...], float]:
        return {
            tuple(s.labels.get(name, "") for name in labels): s.value
            for s in self.prometheus.query(expr)
        }

    def eventually(self, what: Callable[[], Any], ok: Callable[[Any], bool], name: str) -> None:
        """Until `ok(what())` (the last scrapes may still be on their way)."""
        seen: list[Any] = []

        def check() -> bool:
            seen.append(what())
            return ok(seen[-1])

        try:
            wait_for(check, 20, interval=0.5)
        except WaitTimeout:
            raise AssertionError(f"{name}: Prometheus says {seen[-1]!r}") from None

    def equal(
        self, expr: str, labels: tuple[str, ...], expected: dict[tuple[str, ...], float]
    ) -> None:
        self.eventually(lambda: self.by(expr, *labels), lambda got: got == expected, expr)

    def close(
        self, expr: str, labels: tuple[str, ...], expected: dict[tuple[str, ...], float]
    ) -> None:
        """Sums of whole seconds, added as floats."""

        def near(got: dict[tuple[str, ...], float]) -> bool:
            return got.keys() == expected.keys() and all(
                abs(got[k] - v) < 1e-6 for k, v in expected.items()
            )

        self.eventually(lambda: self.by(expr, *labels), near, expr)

    def each(
        self, expr: str, label: str, names: tuple[str, ...], ok: Callable[[float], bool]
    ) -> None:
        """Every one of `names` (values of `label`) has a series, and `ok` of its value."""

        def good(got: dict[tuple[str, ...], float]) -> bool:
            return all((name,) in got and ok(got[(name,)]) for name in names)

        self.eventually(lambda: self.by(expr, label), good, expr)


def _per_kind(**values: float) -> dict[tuple[str, ...], float]:
    """`values` by served kind, 0 for the others (every series exists from start-up)."""
    return {(kind,): values.get(kind, 0.0) for kind in SERVED}


def _per_end(values: dict[tuple[str, str], float]) -> dict[tuple[str, ...], float]:
    """`values` by (kind, end), 0 for every other served kind and end."""
    ends = ("Succeeded", "Failed")
    return {(kind, end): values.get((kind, end), 0.0) for kind in SERVED for end in ends}


def test_every_documented_series_answers_through_promql(scenario: Scenario) -> None:
    read = Reader(scenario)
    j, o = read.jobs, read.operator
    jobs = scenario.jobs
    checked: set[str] = set()

    def counter(name: str, **values: float) -> None:
        read.equal(f"sum by (framework) ({name}{{{j}}})", ("framework",), _per_kind(**values))
        checked.add(name)

    # Kubeflow's job counters; tf-ok was deleted by its user, pd-ttl by its TTL.
    counter("training_operator_jobs_created_total", **dict.fromkeys(KINDS, 1.0))
    counter("training_operator_jobs_successful_total", tensorflow=1, jax=1, xgboost=1)
    counter("training_operator_jobs_failed_total", pytorch=1, paddle=1)
    counter("training_operator_jobs_restarted_total", jax=1, paddle=1)
    counter("training_operator_jobs_deleted_total", tensorflow=1, paddle=1)

    # Jobs by phase: the two deleted jobs left; every phase of every kind is there.
    read.equal(
        f"sum by (framework, phase) (tfjob_jobs{{{j}}}) > 0",
        ("framework", "phase"),
        {("pytorch", "Failed"): 1, ("jax", "Succeeded"): 1, ("xgboost", "Succeeded"): 1},
    )
    read.equal(f"count(tfjob_jobs{{{j}}})", (), {(): len(FRAMEWORKS) * len(PHASES)})
    checked.add("tfjob_jobs")

    # Times, from the statuses the API server stored. tf-ok and pt-fail ran once, so
    # their Running condition is their first; jax-restart ran again after a restart
    # (the scenario waits for that Running): its first Running was no later than the
    # one its status keeps (whole seconds).
    startup = "tfjob_job_startup_seconds"
    read.equal(
        f"sum by (framework) ({startup}_count{{{o}}})",
        ("framework",),
        _per_kind(tensorflow=1, pytorch=1, jax=1, paddle=1),
    )
    read.close(
        f'sum by (framework) ({startup}_sum{{{o},framework=~"tensorflow|pytorch"}})',
        ("framework",),
        {(k,): _since_created(jobs[k], "Running") for k in ("tensorflow", "pytorch")},
    )
    last_ran = _since_created(jobs["jax"], "Running")
    read.each(
        f"sum by (framework) ({startup}_sum{{{o}}})",
        "framework",
        ("jax",),
        lambda s: 0 <= s <= last_ran,
    )
    checked.add(startup)

    queued = jobs["xgboost"]
    resumed = "tfjob_job_resume_to_running_seconds"
    read.close(f"sum by (framework) ({resumed}_count{{{o}}})", ("framework",), _per_kind(xgboost=1))
    waited = (_when(queued, "Running") - _when(queued, "Suspended")).total_seconds()
    read.close(
        f"sum by (framework) ({resumed}_sum{{{o}}})", ("framework",), _per_kind(xgboost=waited)
    )
    checked.add(resumed)
    suspended = "tfjob_job_suspended_seconds"
    read.close(
        f"sum by (framework) ({suspended}_count{{{o}}})", ("framework",), _per_kind(xgboost=1)
    )
    read.each(
        f"sum by (framework) ({suspended}_sum{{{o}}})",
        "framework",
        ("xgboost",),
        lambda s: scenario.queued_seconds <= s <= _since_created(queued, "Suspended"),
    )
    checked.add(suspended)

    ends = {(kind, _end(job)): job for kind, job in jobs.items()}
    for name, start in (("tfjob_job_run_seconds", "Running"), ("tfjob_job_duration_seconds", None)):
        read.equal(
            f"sum by (framework, phase) ({name}_count{{{o}}})",
            ("framework", "phase"),
            _per_end(dict.fromkeys(ends, 1.0)),
        )
        expected = {
            key: (
                _since_created(job, key[1])
                if start is None
                else (_when(job, key[1]) - _when(job, start)).total_seconds()
            )
            for key, job in ends.items()
        }
        read.close(
            f"sum by (framework, phase) ({name}_sum{{{o}}})",
            ("framework", "phase"),
            _per_end(expected),
        )
        checked.add(name)

    read.equal(
        f"sum by (framework, replica_type, reason) (tfjob_job_restarts_total{{{j}}})",
        ("framework", "replica_type", "reason"),
        {("jax", "Worker", "OOMKilled"): 1, ("paddle", "Worker", "RetryableExitCode"): 1},
    )
    checked.add("tfjob_job_restarts_total")
    read.equal(
        f"tfjob_build_info{{{o}}}", ("version",), {(importlib.metadata.version("tfjob"),): 1}
    )
    checked.add("tfjob_build_info")

    # Pods and services: 7 pods (the two restarted replicas twice), 5 services; pods
    # deleted only for the two restarts (cleanPodPolicy None keeps finished ones).
    for name, value in (
        ("created_pods_total", 7),
        ("deleted_pods_total", 2),
        ("succeeded_service_creation_total", 5),
        ("failed_service_creation_total", 0),
        ("created_pod_groups_total", 0),
        ("deleted_pod_groups_total", 0),
    ):
        read.equal(f"{name}{{{o}}}", (), {(): value})
        checked.add(name)
    # Counted at each reconcile that sees them: at least once for each of the 4.
    read.each(f"sum by (job) (failed_pods_total{{{o}}})", "job", (JOB,), lambda v: v >= 4)
    checked.add("failed_pods_total")

    # The controller's own series: one set per kind's controller.
    positive, some = (lambda v: v > 0), (lambda v: v >= 0)
    for name, expr, ok in (
        (
            "controller_runtime_reconcile_total",
            f'controller_runtime_reconcile_total{{{o},result="success"}}',
            positive,
        ),
        (
            "controller_runtime_reconcile_errors_total",
            f"controller_runtime_reconcile_errors_total{{{o}}}",
            some,
        ),
        (
            "controller_runtime_reconcile_time_seconds",
            f"controller_runtime_reconcile_time_seconds_count{{{o}}}",
            positive,
        ),
    ):
        read.each(f"sum by (controller) ({expr})", "controller", CONTROLLERS, ok)
        checked.add(name)
    for name, ok in (
        ("workqueue_depth", some),
        ("workqueue_adds_total", positive),
        ("workqueue_retries_total", some),
        ("workqueue_queue_duration_seconds", positive),
        ("workqueue_work_duration_seconds", positive),
        ("workqueue_unfinished_work_seconds", some),
        ("workqueue_longest_running_processor_seconds", some),
    ):
        series = f"{name}_count" if name.endswith("duration_seconds") else name
        read.each(f"sum by (name) ({series}{{{o}}})", "name", CONTROLLERS, ok)
        checked.add(name)
    # At least the 7 pods and 5 services were created (201), besides Events.
    read.each(
        f'sum by (code) (rest_client_requests_total{{{o},method="POST"}})',
        "code",
        ("201",),
        lambda v: v >= 12,
    )
    checked.add("rest_client_requests_total")
    read.equal(f"leader_election_master_status{{{o}}}", ("name",), {(scenario.lease,): 1})
    checked.add("leader_election_master_status")
    for name in PROCESS:
        read.each(f"sum by (job) ({name}{{{o}}})", "job", (JOB,), positive)
    checked.add("process_*")

    read.each(f"sum by (job) (tfjob_events_recorded_total{{{o}}})", "job", (JOB,), positive)
    read.each(f"sum by (verb) (tfjob_event_writes_total{{{o}}})", "verb", ("create",), positive)
    read.each(f"sum by (job) (tfjob_event_write_retries_total{{{o}}})", "job", (JOB,), some)
    read.equal(f"tfjob_events_pending{{{o}}}", (), {(): 0})
    read.equal(
        f"sum by (reason) (tfjob_events_dropped_total{{{o}}})",
        ("reason",),
        {("rejected",): 0, ("overflow",): 0, ("shutdown",): 0},
    )
    checked |= {
        "tfjob_events_recorded_total",
        "tfjob_event_writes_total",
        "tfjob_event_write_retries_total",
        "tfjob_events_pending",
        "tfjob_events_dropped_total",
    }
    assert checked == CHECKED


def test_a_restarted_operator_counts_and_times_nothing_twice(
    prometheus: Prometheus, operators: Operators, jobs: Jobs, kwok: KwokPods
) -> None:
    """Kubeflow counts every job again at each operator start; here the second
    process counts no job as created and times nothing it did not see happen."""
    first = operators.start()
    prometheus.scrape(f"127.0.0.1:{first.metrics_port}")
    done = {RUN_FOR_ANNOTATION: "1s", EXIT_CODE_ANNOTATION: "0"}
    jobs.create("done", {"Worker": replica(1, annotations=done)})
    jobs.create("long", {"Worker": replica(1)})
    jobs.wait_condition("done", "Succeeded", timeout=30)
    jobs.wait_condition("long", "Running", timeout=30)
    ns = f'job_namespace="{jobs.namespace}"'
    before = f'instance="127.0.0.1:{first.metrics_port}"'
    prometheus.wait_value(f"sum(training_operator_jobs_created_total{{{before},{ns}}})", 2)
    prometheus.wait_value(f"sum(tfjob_job_startup_seconds_count{{{before}}})", 2)
    assert first.stop() == 0

    second = operators.start()
    prometheus.scrape(f"127.0.0.1:{second.metrics_port}")
    after = f'instance="127.0.0.1:{second.metrics_port}"'
    prometheus.wait_value(f'sum(tfjob_jobs{{{after},{ns},phase="Running"}})', 1)
    assert prometheus.value(f'sum(tfjob_jobs{{{after},{ns},phase="Succeeded"}})') == 1
    assert prometheus.value(f"sum(training_operator_jobs_created_total{{{after},{ns}}})") == 0
    assert prometheus.value(f"sum(tfjob_job_startup_seconds_count{{{after}}})") == 0
    kwok.end(jobs.namespace, "long-worker-0", 0)
    jobs.wait_condition("long", "Succeeded", timeout=30)
    # What happened under the second process is its to observe.
    prometheus.wait_value(f"sum(training_operator_jobs_successful_total{{{after},{ns}}})", 1)
    prometheus.wait_value(f'sum(tfjob_job_run_seconds_count{{{after},phase="Succeeded"}})', 1)
    assert prometheus.value(f"sum(tfjob_job_startup_seconds_count{{{after}}})") == 0
    # Over both processes: 2 jobs created, not 4 (Kubeflow's second process counts
    # both again). The last value of each process's series, summed: increase() would
    # extrapolate these few-second series past their samples.
    total = f"sum(last_over_time(training_operator_jobs_created_total{{{ns}}}[10m]))"
    assert prometheus.value(total) == 2
