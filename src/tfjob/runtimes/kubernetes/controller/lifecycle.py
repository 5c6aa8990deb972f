"""Job lifecycle metrics, read from the jobs' own status as the caches see it change.

Every time here is a difference of two timestamps the job carries: its
creationTimestamp and its conditions' lastTransitionTime. None is read from the
clock, so a time is right however late the operator sees the change, and the
operator's own latency is not mistaken for the job's.

An observation is made when the job cache shows a transition, old object against
new: Running, resumed, finished, a restart the status counts (`counted_pods`), a
deletion. A job seen for the first time (`on_add`: the start-up list, or a job just
created) is never observed for what its status already shows. So a restarted
operator does not count or time again what the one before it saw; what that one saw
in its last moments after its last scrape is lost, as any counter's last increments
are. Only the leader runs the informers, so two replicas never both observe a job.
(docs/decisions/0029-lifecycle-metrics-from-conditions.md)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tfjob.api import constants as c
from tfjob.api.observed import Pod
from tfjob.api.timestamps import parse_rfc3339
from tfjob.api.types import JobCondition, JobStatus
from tfjob.core import conditions
from tfjob.core.pods import is_retryable_exit_code
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.consistency import JobCaches
from tfjob.runtimes.kubernetes.cache.informer import Handlers
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.transport.decode import CachedJob

#: A job's phase in `tfjob_jobs`: its condition types, and Pending before any.
PHASES = (
    "Pending",
    c.CREATED,
    c.RUNNING,
    c.RESTARTING,
    c.SUSPENDED,
    c.SUCCEEDED,
    c.FAILED,
)
#: The `reason` of `tfjob_job_restarts_total`: a fixed set, so no pod can grow it.
RESTART_REASONS = ("Evicted", "OOMKilled", "RetryableExitCode", "ExitCode", "Unknown")


def phase(status: JobStatus) -> str:
    """The one phase a job is in: a finished job's end first, then what holds it."""
    for condition_type in (c.FAILED, c.SUCCEEDED, c.SUSPENDED, c.RESTARTING, c.RUNNING):
        if conditions.is_true(status, condition_type):
            return condition_type
    return c.CREATED if conditions.find(status, c.CREATED) is not None else "Pending"


def restart_reason(pod: Pod, container: str) -> str:
    """Why a failed pod is replaced, in `RESTART_REASONS`: evicted, its training
    container OOM-killed, killed by a signal (an exit code >= 128, which upstream
    retries), any other exit code, or no exit code at all."""
    if pod.status.reason == "Evicted":
        return "Evicted"
    status = pod.container_status(container)
    terminated = status.state.terminated if status is not None else None
    if terminated is None:
        return "Unknown"
    if terminated.reason == "OOMKilled":
        return "OOMKilled"
    return "RetryableExitCode" if is_retryable_exit_code(terminated.exit_code) else "ExitCode"


def _time(condition: JobCondition | None) -> datetime | None:
    if condition is None or condition.last_transition_time is None:
        return None
    return parse_rfc3339(condition.last_transition_time)


def _resumed_at(suspended: JobCondition | None) -> datetime | None:
    """When a job that was suspended was resumed (None: never suspended, or still)."""
    return _time(suspended) if suspended is not None and suspended.status == "False" else None


def _not_yet_run(status: JobStatus) -> bool:
    """Whether a status shows a job that has not run yet: neither Running nor
    Restarting (each removes the other, so a restart hides an earlier run), nor ended."""
    shown = (conditions.find(status, t) for t in (c.RUNNING, c.RESTARTING))
    return not any(shown) and not conditions.is_finished(status)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    """`end - start`, never negative (creationTimestamp is the API server's clock,
    conditions the operator's)."""
    if start is None or end is None:
        return None
    return max((end - start).total_seconds(), 0.0)


@dataclass(frozen=True)
class _Failed:
    """A failed pod as it was seen, kept until the job's status counts its restart."""

    replica_type: str
    reason: str


class JobLifecycle:
    """One kind's lifecycle series, fed by its jobs' and pods' cache handlers."""

    def __init__(
        self, kind: Framework[Any], metrics: Metrics, namespace: str | None = None
    ) -> None:
        """`namespace`: the one an operator is limited to (`--namespace`), whose series
        then start at 0 before its first job."""
        self._kind = kind
        self._metrics = metrics
        self._framework = kind.metrics_name
        self._running_reason = kind.reason("Running")
        self._namespaces: set[str] = set()
        # job UID -> failed pod UID -> what it was. Kept past the pod's deletion: the
        # job's status write that counts the restart comes first, but the caches may
        # show the two in either order. Dropped when counted or the job goes.
        self._failed: dict[str, dict[str, _Failed]] = {}
        # UIDs of jobs seen before they ever ran: their first Running is a start-up
        # even after a Restarting (a pod that failed before the job ran), which the
        # status alone cannot tell from a recovery (each condition removes the other).
        # Dropped at the first Running, the end, or the job's deletion.
        self._never_ran: set[str] = set()
        # Every histogram series of the kind exists from start-up, empty: a series that
        # appears with its first observation shows no increase to rate(), so a
        # dashboard's quantile of the first jobs would be empty (kubeflow/trainer#2408's
        # problem, for histograms). They carry no namespace, so this is a fixed cost:
        # 7 label sets per kind.
        m = metrics
        for histogram in (m.job_startup, m.job_resume_to_running, m.job_suspended):
            histogram.labels(framework=self._framework)
        for histogram in (m.job_run, m.job_duration):
            for end in (c.SUCCEEDED, c.FAILED):
                histogram.labels(framework=self._framework, phase=end)
        if namespace is not None:
            self._first_in(namespace)

    def watch(self, caches: JobCaches) -> None:
        """Observe the kind's caches (before they run)."""
        caches.jobs.add_handlers(self.job_handlers())
        caches.pods.add_handlers(self.pod_handlers())

    def job_handlers(self) -> Handlers[CachedJob]:
        return Handlers(on_add=self._added, on_update=self._updated, on_delete=self._deleted)

    def pod_handlers(self) -> Handlers[Pod]:
        return Handlers(on_add=self._pod_seen, on_update=lambda _old, new: self._pod_seen(new))

    # -- jobs ---------------------------------------------------------------------------

    def _added(self, job: CachedJob) -> None:
        namespace = job.metadata.namespace
        self._first_in(namespace)
        self._gauge(namespace, phase(job.status)).inc()
        if not job.status.conditions:  # no operator has taken it up: a new job
            self._metrics.job(self._metrics.jobs_created, namespace, self._framework)
        if _not_yet_run(job.status):
            self._never_ran.add(job.metadata.uid)

    def _updated(self, old: CachedJob, new: CachedJob) -> None:
        before, after = phase(old.status), phase(new.status)
        if before != after:
            self._gauge(new.metadata.namespace, before).dec()
            self._gauge(new.metadata.namespace, after).inc()
        self._observe_running(old, new)
        self._observe_resume(old.status, new.status)
        self._observe_end(old, new)
        self._observe_restarts(old, new)

    def _deleted(self, job: CachedJob) -> None:
        namespace = job.metadata.namespace
        self._gauge(namespace, phase(job.status)).dec()
        self._metrics.job(self._metrics.jobs_deleted, namespace, self._framework)
        self._failed.pop(job.metadata.uid, None)
        self._never_ran.discard(job.metadata.uid)

    def _first_in(self, namespace: str) -> None:
        """Every job series of a namespace appears at 0 with its first job, so that
        Prometheus' increase() and rate() see the first increment (a counter series
        that appears at 1 shows no increase: kubeflow/trainer#2408)."""
        if namespace in self._namespaces:
            return
        self._namespaces.add(namespace)
        m = self._metrics
        for counter in (
            m.jobs_created,
            m.jobs_deleted,
            m.jobs_successful,
            m.jobs_failed,
            m.jobs_restarted,
        ):
            counter.labels(job_namespace=namespace, framework=self._framework)
        for name in PHASES:
            self._gauge(namespace, name)

    def _gauge(self, namespace: str, name: str) -> Any:
        return self._metrics.jobs.labels(
            job_namespace=namespace, framework=self._framework, phase=name
        )

    # -- what a transition tells ---------------------------------------------------------

    def _ran(self, status: JobStatus) -> JobCondition | None:
        """The Running condition if its last transition was to True (a finished job's
        Running is False but keeps that reason and time)."""
        running = conditions.find(status, c.RUNNING)
        return running if running is not None and running.reason == self._running_reason else None

    def _observe_running(self, old: CachedJob, new: CachedJob) -> None:
        """A new transition to Running: timed from the job's creation if it is its
        first, from its resume if it follows one; a restart's recovery is neither."""
        running, before = self._ran(new.status), self._ran(old.status)
        uid = new.metadata.uid
        if running is None or (
            before is not None and before.last_transition_time == running.last_transition_time
        ):
            if conditions.is_finished(new.status):
                self._never_ran.discard(uid)
            return
        at = _time(running)
        first = uid in self._never_ran
        self._never_ran.discard(uid)
        stopped = self._stopped(old.status, before)
        resumed = _resumed_at(conditions.find(new.status, c.SUSPENDED))
        if resumed is not None:
            if stopped is None or resumed >= stopped:
                self._observe(self._metrics.job_resume_to_running, _seconds(resumed, at))
        elif first or stopped is None:
            created = new.metadata.creation_timestamp
            start = parse_rfc3339(created) if created else None
            self._observe(self._metrics.job_startup, _seconds(start, at))

    @staticmethod
    def _stopped(old: JobStatus, ran: JobCondition | None) -> datetime | None:
        """When the job last stopped running before, if it ran or restarted at all:
        its Restarting, or an earlier Running (both seen together after a watch gap)."""
        restarting = conditions.find(old, c.RESTARTING)
        times = [_time(ran)] if ran is not None else []
        if restarting is not None and restarting.status == "True":
            times.append(_time(restarting))
        known = [t for t in times if t is not None]
        return max(known) if known else None

    def _observe_resume(self, old: JobStatus, new: JobStatus) -> None:
        """Suspended True -> False: the time it was held (Kueue's queue time)."""
        before, after = conditions.find(old, c.SUSPENDED), conditions.find(new, c.SUSPENDED)
        if before is None or after is None or before.status != "True" or after.status != "False":
            return
        self._observe(self._metrics.job_suspended, _seconds(_time(before), _time(after)))

    def _observe_end(self, old: CachedJob, new: CachedJob) -> None:
        if conditions.is_finished(old.status) or not conditions.is_finished(new.status):
            return
        end_type = c.FAILED if conditions.is_true(new.status, c.FAILED) else c.SUCCEEDED
        end = _time(conditions.find(new.status, end_type))
        created = new.metadata.creation_timestamp
        start = parse_rfc3339(created) if created else None
        self._observe(self._metrics.job_duration, _seconds(start, end), phase=end_type)
        running = self._ran(new.status)
        if running is not None:  # it ended from Running (not while restarting)
            self._observe(self._metrics.job_run, _seconds(_time(running), end), phase=end_type)

    def _observe(self, histogram: Any, seconds: float | None, **labels: str) -> None:
        if seconds is not None:
            histogram.labels(framework=self._framework, **labels).observe(seconds)

    # -- restarts -------------------------------------------------------------------------

    def _pod_seen(self, pod: Pod) -> None:
        """Remember a failed pod of this kind's jobs. The pod cache is every kind's
        (cache/shared.py), and a pod of another kind's job would never be counted
        here, nor forgotten with its job."""
        if pod.status.phase != "Failed":
            return
        job = self._owning_job(pod)
        if job is None:
            return
        label = pod.metadata.labels.get(c.LABEL_REPLICA_TYPE, "")
        replica_type = self._kind.canonical_type(label) or label
        reason = restart_reason(pod, self._kind.container_name)
        self._failed.setdefault(job, {})[pod.metadata.uid] = _Failed(replica_type, reason)

    def _owning_job(self, pod: Pod) -> str | None:
        """The UID of the job of this kind that controls `pod`, if one does (by the
        kind's name: the cache holds only pods labelled for this operator's kinds)."""
        for ref in pod.metadata.owner_references:
            if ref.controller:
                return ref.uid if ref.kind == self._kind.kind else None
        return None

    def _observe_restarts(self, old: CachedJob, new: CachedJob) -> None:
        """Each pod UID the status newly counts is one replica the operator recreated
        (the core's count-once rule: docs/consistency.md)."""
        counted = [uid for uid in new.status.counted_pods if uid not in old.status.counted_pods]
        if not counted:
            return
        seen = self._failed.get(new.metadata.uid, {})
        for uid in counted:
            failed = seen.pop(uid, None) or _Failed("Unknown", "Unknown")
            self._metrics.job_restarts.labels(
                job_namespace=new.metadata.namespace,
                framework=self._framework,
                replica_type=failed.replica_type,
                reason=failed.reason,
            ).inc()
        if not seen:
            self._failed.pop(new.metadata.uid, None)
