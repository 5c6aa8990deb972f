"""The lifecycle series (controller/lifecycle.py) as a job's statuses pass through the
job cache: each status here is what the real core decided at a given time, handed to
the lifecycle's cache handlers old against new, as the informer does. No control
plane: test_prometheus.py checks the same series on a real cluster through Prometheus.
"""

from __future__ import annotations

import msgspec
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from testkit.builders import advance, job, later, pod, replica, run, with_spec
from tfjob.api.observed import Pod, PodStatus
from tfjob.api.timestamps import rfc3339
from tfjob.api.types import RunPolicy
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.controller.lifecycle import JobLifecycle, restart_reason
from tfjob.runtimes.kubernetes.controller.metrics import Metrics

Sample = tuple[str, tuple[tuple[str, str], ...]]
TF = (("framework", "tensorflow"),)
NS = (("framework", "tensorflow"), ("job_namespace", "default"))


def samples(metrics: Metrics) -> dict[Sample, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def histogram(metrics: Metrics, name: str, **labels: str) -> tuple[float, float]:
    """(count, sum) of one histogram's series."""
    key = tuple(sorted({"framework": "tensorflow", **labels}.items()))
    found = samples(metrics)
    return found.get((f"{name}_count", key), 0.0), found.get((f"{name}_sum", key), 0.0)


def phases(metrics: Metrics) -> dict[str, float]:
    return {
        dict(labels)["phase"]: value
        for (name, labels), value in samples(metrics).items()
        if name == "tfjob_jobs" and value
    }


class Cluster:
    """One TFJob as the caches would show it, moved on by the core at given seconds."""

    def __init__(self, lifecycle: JobLifecycle, current: TFJob) -> None:
        self.lifecycle = lifecycle
        self.jobs = lifecycle.job_handlers()
        self.pods = lifecycle.pod_handlers()
        self.job = current
        self.shown = current  # what the job cache last showed the lifecycle
        self.jobs.on_add(current)

    def at(self, seconds: float, *observed: Pod, seen: bool = True) -> TFJob:
        """The core's reconcile at `seconds` after creation, its status stored; the
        cache shows it unless not `seen` (a watch gap: a relist shows it later)."""
        for each in observed:
            self.pods.on_add(each)
        self.job = advance(self.job, run(self.job, list(observed), now=later(seconds)))
        if seen:
            self.show()
        return self.job

    def show(self) -> None:
        self.jobs.on_update(self.shown, self.job)
        self.shown = self.job


def created(**kw: object) -> TFJob:
    """A TFJob created at `later(0)`, the origin of every time here."""
    tfjob = job(**kw)  # type: ignore[arg-type]
    meta = msgspec.structs.replace(tfjob.metadata, creation_timestamp=rfc3339(later(0)))
    return msgspec.structs.replace(tfjob, metadata=meta)


def test_a_job_that_runs_and_succeeds_is_timed_from_its_own_conditions() -> None:
    metrics = Metrics()
    cluster = Cluster(JobLifecycle(TENSORFLOW, metrics), created(Worker=replica(1)))
    assert samples(metrics)[("training_operator_jobs_created_total", NS)] == 1
    assert phases(metrics) == {"Pending": 1}
    cluster.at(2)  # pods created
    assert phases(metrics) == {"Created": 1}
    cluster.at(7, pod("worker", 0, "Running"))
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 7)
    assert phases(metrics) == {"Running": 1}
    cluster.at(30, pod("worker", 0, "Succeeded", exit_code=0))
    assert histogram(metrics, "tfjob_job_run_seconds", phase="Succeeded") == (1, 23)
    assert histogram(metrics, "tfjob_job_duration_seconds", phase="Succeeded") == (1, 30)
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 7)  # not again
    assert phases(metrics) == {"Succeeded": 1}
    # Seen later (another reconcile, nothing new): nothing is observed twice.
    cluster.at(40, pod("worker", 0, "Succeeded", exit_code=0))
    assert histogram(metrics, "tfjob_job_run_seconds", phase="Succeeded") == (1, 23)


def test_a_restarted_operator_neither_counts_nor_times_what_it_finds() -> None:
    first = Metrics()
    cluster = Cluster(JobLifecycle(TENSORFLOW, first), created(Worker=replica(1)))
    cluster.at(1)
    cluster.at(5, pod("worker", 0, "Running"))

    second = Metrics()  # the next operator process: its start-up list adds the job
    after = Cluster(JobLifecycle(TENSORFLOW, second), cluster.job)
    assert samples(second)[("training_operator_jobs_created_total", NS)] == 0
    assert histogram(second, "tfjob_job_startup_seconds") == (0, 0)
    assert phases(second) == {"Running": 1}
    after.at(9, pod("worker", 0, "Failed", exit_code=1))
    assert histogram(second, "tfjob_job_run_seconds", phase="Failed") == (1, 4)
    assert histogram(second, "tfjob_job_duration_seconds", phase="Failed") == (1, 9)
    assert phases(second) == {"Failed": 1}


def test_a_suspended_job_is_timed_in_the_queue_and_from_its_resume() -> None:
    metrics = Metrics()
    suspended = created(Worker=replica(1), run_policy={"suspend": True})
    cluster = Cluster(JobLifecycle(TENSORFLOW, metrics), suspended)
    cluster.at(3)
    assert phases(metrics) == {"Suspended": 1}
    cluster.job = with_spec(cluster.job, run_policy=RunPolicy(suspend=False))
    cluster.at(63)  # admitted: resumed, pods created
    assert histogram(metrics, "tfjob_job_suspended_seconds") == (1, 60)
    cluster.at(70, pod("worker", 0, "Running"))
    assert histogram(metrics, "tfjob_job_resume_to_running_seconds") == (1, 7)
    # Its creation-to-Running would include the queue: it is not a start-up time.
    assert histogram(metrics, "tfjob_job_startup_seconds") == (0, 0)


def test_restarts_are_counted_by_replica_type_and_reason_once_each() -> None:
    metrics = Metrics()
    tfjob = created(Worker=replica(1, restart="ExitCode"), PS=replica(1, restart="OnFailure"))
    cluster = Cluster(JobLifecycle(TENSORFLOW, metrics), tfjob)
    cluster.at(1)
    cluster.at(4, pod("worker", 0, "Running"), pod("ps", 0, "Running"))
    killed = pod("worker", 0, "Failed", exit_code=137)
    cluster.at(10, killed, pod("ps", 0, "Running"))
    assert phases(metrics) == {"Restarting": 1}
    restarts = ("tfjob_job_restarts_total", (*NS, ("reason", "RetryableExitCode"), ("replica_type", "Worker")))  # fmt: skip
    assert samples(metrics)[restarts] == 1
    cluster.at(11, killed, pod("ps", 0, "Running"))  # the same failure, seen again
    assert samples(metrics)[restarts] == 1
    replacement = pod("worker", 0, "Running", uid="uid-second")
    cluster.at(15, replacement, pod("ps", 0, "Running"))
    assert phases(metrics) == {"Running": 1}
    # Back from a restart is not a start-up.
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 4)
    oom = pod("ps", 0, "Failed", exit_code=137, reason="OOMKilled")
    cluster.at(20, replacement, oom)
    ps = ("tfjob_job_restarts_total", (*NS, ("reason", "OOMKilled"), ("replica_type", "PS")))
    assert samples(metrics)[ps] == 1
    assert samples(metrics)[restarts] == 1


def test_a_job_whose_first_pod_fails_before_it_runs_is_timed_to_its_first_running() -> None:
    metrics = Metrics()
    cluster = Cluster(JobLifecycle(TENSORFLOW, metrics), created(Worker=replica(1, restart="ExitCode")))  # fmt: skip
    cluster.at(1)
    cluster.at(3, pod("worker", 0, "Failed", exit_code=137))  # before any Running
    assert phases(metrics) == {"Restarting": 1}
    cluster.at(8, pod("worker", 0, "Running", uid="uid-second"))
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 8)
    # A later restart's recovery is no start-up.
    cluster.at(12, pod("worker", 0, "Failed", exit_code=137, uid="uid-second"))
    cluster.at(20, pod("worker", 0, "Running", uid="uid-third"))
    assert phases(metrics) == {"Running": 1}
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 8)

    # An operator that finds a job Restarting cannot tell whether it ever ran: its
    # next Running is not timed.
    second = Metrics()
    found = Cluster(JobLifecycle(TENSORFLOW, second), cluster.at(25, pod("worker", 0, "Failed", exit_code=137, uid="uid-third")))  # fmt: skip
    assert phases(second) == {"Restarting": 1}
    found.at(30, pod("worker", 0, "Running", uid="uid-fourth"))
    assert histogram(second, "tfjob_job_startup_seconds") == (0, 0)


def test_what_a_watch_gap_hid_is_observed_from_the_conditions_it_left() -> None:
    metrics = Metrics()
    cluster = Cluster(JobLifecycle(TENSORFLOW, metrics), created(Worker=replica(1, restart="ExitCode")))  # fmt: skip
    cluster.at(1)
    cluster.at(4, pod("worker", 0, "Running"))
    cluster.at(10, pod("worker", 0, "Failed", exit_code=137), seen=False)
    cluster.at(15, pod("worker", 0, "Running", uid="uid-second"), seen=False)
    cluster.show()  # Running at 4, then Running at 15: a recovery, not a second start
    assert histogram(metrics, "tfjob_job_startup_seconds") == (1, 4)
    cluster.at(25, pod("worker", 0, "Succeeded", exit_code=0, uid="uid-second"), seen=False)
    cluster.show()
    assert histogram(metrics, "tfjob_job_run_seconds", phase="Succeeded") == (1, 10)

    quick = Metrics()  # a job that started and ended while the watch was down
    gap = Cluster(JobLifecycle(TENSORFLOW, quick), created(Worker=replica(1)))
    gap.at(1)
    gap.at(3, pod("worker", 0, "Running"), seen=False)
    gap.at(8, pod("worker", 0, "Succeeded", exit_code=0), seen=False)
    gap.show()
    assert histogram(quick, "tfjob_job_startup_seconds") == (1, 3)
    assert histogram(quick, "tfjob_job_run_seconds", phase="Succeeded") == (1, 5)
    assert histogram(quick, "tfjob_job_duration_seconds", phase="Succeeded") == (1, 8)


def test_restart_reasons_are_a_fixed_set() -> None:
    evicted = pod("worker", 0, "Failed")
    evicted = msgspec.structs.replace(
        evicted, status=PodStatus(phase="Failed", reason="Evicted", message="low on memory")
    )
    assert restart_reason(evicted, "tensorflow") == "Evicted"
    assert restart_reason(pod("worker", 0, "Failed"), "tensorflow") == "Unknown"
    oom = pod("worker", 0, "Failed", exit_code=137, reason="OOMKilled")
    assert restart_reason(oom, "tensorflow") == "OOMKilled"
    assert restart_reason(pod("worker", 0, "Failed", exit_code=143), "tensorflow") == (
        "RetryableExitCode"
    )
    assert restart_reason(pod("worker", 0, "Failed", exit_code=3), "tensorflow") == "ExitCode"


def test_every_deletion_is_counted_and_leaves_the_phase() -> None:
    metrics = Metrics()
    lifecycle = JobLifecycle(TENSORFLOW, metrics)
    cluster = Cluster(lifecycle, created(Worker=replica(1)))
    cluster.at(1)
    lifecycle.job_handlers().on_delete(cluster.job)  # `kubectl delete`, not a TTL
    assert samples(metrics)[("training_operator_jobs_deleted_total", NS)] == 1
    assert phases(metrics) == {}


def test_a_namespaces_job_series_start_at_zero() -> None:
    """Prometheus' increase() misses the first increment of a series that appears at
    1: every job counter and phase of a namespace appears with its first job."""
    metrics = Metrics()
    Cluster(JobLifecycle(TENSORFLOW, metrics), created(Worker=replica(1)))
    found = samples(metrics)
    for name in ("successful", "failed", "restarted", "deleted"):
        assert found[(f"training_operator_jobs_{name}_total", NS)] == 0
    assert found[("tfjob_jobs", (*NS, ("phase", "Succeeded")))] == 0


def test_an_operator_limited_to_a_namespace_has_its_series_before_any_job() -> None:
    metrics = Metrics()
    JobLifecycle(TENSORFLOW, metrics, "team-a")
    key = (("framework", "tensorflow"), ("job_namespace", "team-a"))
    assert samples(metrics)[("training_operator_jobs_created_total", key)] == 0
    assert samples(metrics)[("tfjob_jobs", (*key, ("phase", "Running")))] == 0


def test_build_info_names_the_version() -> None:
    found = samples(Metrics())
    (labels,) = [dict(k) for name, k in found if name == "tfjob_build_info"]
    assert labels["version"] and labels["python_version"].count(".") == 2


def test_every_histogram_of_a_kind_is_there_empty_before_its_first_job() -> None:
    """So that rate() and a dashboard's quantiles see the first observation."""
    found = samples(Metrics())
    assert ("tfjob_job_startup_seconds_count", TF) not in found
    metrics = Metrics()
    JobLifecycle(TENSORFLOW, metrics)
    assert histogram(metrics, "tfjob_job_startup_seconds") == (0, 0)
    assert ("tfjob_job_suspended_seconds_count", TF) in samples(metrics)
    assert ("tfjob_job_resume_to_running_seconds_count", TF) in samples(metrics)
    for name in ("tfjob_job_run_seconds", "tfjob_job_duration_seconds"):
        for end in ("Succeeded", "Failed"):
            key = (f"{name}_count", (*TF, ("phase", end)))
            assert samples(metrics)[key] == 0
