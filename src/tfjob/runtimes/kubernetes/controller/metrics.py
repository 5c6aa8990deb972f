"""Prometheus metrics, with upstream's names so dashboards keep working.

A registry of its own (not prometheus_client's global one): each operator instance,
and each test, gets clean counters. The `*_created` timestamp series prometheus_client
adds by default are turned off: upstream (Go) does not export them. Beside the job
counters: the standard `process_*` series (CPU, memory, file descriptors, start
time), client-go's work-queue series, and, with leader election,
`leader_election_master_status` (1 while this replica holds the Lease). tfjob's own
lifecycle series (`tfjob_job_*`, `tfjob_jobs`, `tfjob_build_info`) are defined here
and observed by lifecycle.py; docs/metrics.md lists every series.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from tfjob.api import constants as c
from tfjob.runtimes.kubernetes.cache.workqueue import QueueHooks

_JOB_LABELS = ("job_namespace", "framework")
# Job lifetimes are whole seconds (condition times are): 1 s to a week. The histograms
# carry `framework` only, not the namespace: each label set costs a series per bucket
# (docs/decisions/0029-lifecycle-metrics-from-conditions.md).
DURATION_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200,
                    86400, 259200, 604800)  # fmt: skip
# client-go's work-queue histograms: 10 ns to 1000 s, a decade per bucket.
_QUEUE_BUCKETS = tuple(10.0**exponent for exponent in range(-8, 4))


def _job_counter(registry: CollectorRegistry, name: str, what: str) -> Counter:
    return Counter(f"training_operator_jobs_{name}", what, _JOB_LABELS, registry=registry)


def _duration(
    registry: CollectorRegistry, name: str, what: str, extra: tuple[str, ...] = ()
) -> Histogram:
    return Histogram(
        f"tfjob_job_{name}_seconds",
        what,
        ["framework", *extra],
        buckets=DURATION_BUCKETS,
        registry=registry,
    )


def _version() -> str:
    try:
        return importlib.metadata.version("tfjob")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self._request_children: dict[tuple[str, int], Any] = {}
        r = self.registry
        ProcessCollector(registry=r)
        self.jobs_created = _job_counter(r, "created", "Jobs first seen with no condition yet")
        self.jobs_deleted = _job_counter(r, "deleted", "Jobs deleted (by anyone, TTL included)")
        self.jobs_successful = _job_counter(r, "successful", "Jobs that succeeded")
        self.jobs_failed = _job_counter(r, "failed", "Jobs that failed")
        self.jobs_restarted = _job_counter(r, "restarted", "Replica restarts of jobs")
        self.created_pods = Counter("created_pods", "Pods created", registry=r)
        self.deleted_pods = Counter("deleted_pods", "Pods deleted", registry=r)
        self.failed_pods = Counter("failed_pods", "Failed pods seen by a reconcile", registry=r)
        self.services_created = Counter(
            "succeeded_service_creation", "Services created", registry=r
        )
        self.services_failed = Counter(
            "failed_service_creation", "Service creations that failed", registry=r
        )
        self.pod_groups_created = Counter(
            "created_pod_groups", "Gang-scheduling PodGroups created", registry=r
        )
        self.pod_groups_deleted = Counter(
            "deleted_pod_groups", "Gang-scheduling PodGroups deleted", registry=r
        )
        self.reconcile_total = Counter(
            "controller_runtime_reconcile",
            "Reconciles by result",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Reconciles that failed",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time of one reconcile, API writes included",
            ["controller"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.requests = Counter(
            "rest_client_requests",
            "API requests by method and HTTP status code",
            ["method", "code"],
            registry=r,
        )
        self.queue_depth = Gauge("workqueue_depth", "Keys waiting", ["name"], registry=r)
        self.queue_adds = Counter("workqueue_adds", "Keys added", ["name"], registry=r)
        self.queue_retries = Counter(
            "workqueue_retries", "Rate-limited re-adds", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "Time a key waits before a worker takes it",
            ["name"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_work = Histogram(
            "workqueue_work_duration_seconds",
            "Time a worker spends on one key",
            ["name"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration (stuck workers)",
            ["name"],
            registry=r,
        )
        self.queue_longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How long the longest-running worker has been at its key",
            ["name"],
            registry=r,
        )
        self._leader: Gauge | None = None
        self._lifecycle(r)

    def _lifecycle(self, r: CollectorRegistry) -> None:
        """tfjob's job-lifecycle series (lifecycle.py observes them)."""
        self.job_startup = _duration(
            r, "startup", "From a job's creation to its first Running (never suspended)"
        )
        self.job_resume_to_running = _duration(
            r, "resume_to_running", "From a job's resume (admission) to its Running"
        )
        self.job_suspended = _duration(
            r, "suspended", "Time a job spent suspended (queued), observed at its resume"
        )
        self.job_run = _duration(
            r, "run", "From a job's last transition to Running to its end", ("phase",)
        )
        self.job_duration = _duration(r, "duration", "From a job's creation to its end", ("phase",))
        self.job_restarts = Counter(
            "tfjob_job_restarts",
            "Replicas the operator recreated after a failure, by replica type and reason",
            [*_JOB_LABELS, "replica_type", "reason"],
            registry=r,
        )
        self.jobs = Gauge(
            "tfjob_jobs",
            "Jobs in the operator's caches by phase",
            [*_JOB_LABELS, "phase"],
            registry=r,
        )
        build = Gauge(
            "tfjob_build_info",
            "Always 1: the operator's version",
            ["version", "python_version"],
            registry=r,
        )
        build.labels(version=_version(), python_version=platform.python_version()).set(1)

    def count_request(self, method: str, code: int) -> None:
        """One API answer (children cached: this runs for every request)."""
        child = self._request_children.get((method, code))
        if child is None:
            child = self.requests.labels(method=method, code=str(code))
            self._request_children[(method, code)] = child
        child.inc()

    def job(self, counter: Counter, namespace: str, framework: str) -> None:
        """Count one job of `framework` ("tensorflow", "pytorch": upstream's label)."""
        counter.labels(job_namespace=namespace, framework=framework).inc()

    def queue_hooks(self, name: str = c.CONTROLLER_NAME) -> QueueHooks:
        """The hooks of controller `name`'s work queue. Its reconcile series start at 0
        here, once per controller, as controller-runtime's do when a controller starts."""
        for result in ("success", "error"):
            self.reconcile_total.labels(controller=name, result=result)
        self.reconcile_errors.labels(controller=name)
        depth = self.queue_depth.labels(name=name)
        adds = self.queue_adds.labels(name=name)
        retries = self.queue_retries.labels(name=name)
        latency = self.queue_latency.labels(name=name)
        work = self.queue_work.labels(name=name)
        unfinished = self.queue_unfinished.labels(name=name)
        longest = self.queue_longest.labels(name=name)

        def expose(ages: Callable[[], list[float]]) -> None:
            unfinished.set_function(lambda: sum(ages()))
            longest.set_function(lambda: max(ages(), default=0.0))

        return QueueHooks(
            on_add=adds.inc,
            on_depth=depth.set,
            on_retry=retries.inc,
            on_latency=latency.observe,
            on_work=work.observe,
            expose_in_flight=expose,
        )

    def leader_status(self, lease: str) -> Callable[[bool], None]:
        """The setter of `leader_election_master_status{name=lease}` (client-go's)."""
        if self._leader is None:
            self._leader = Gauge(
                "leader_election_master_status",
                "1 while this replica holds the leader-election Lease, else 0",
                ["name"],
                registry=self.registry,
            )
        child = self._leader.labels(name=lease)
        child.set(0)
        return lambda leading: child.set(1 if leading else 0)
