"""The working state of one reconcile pass: the job, what was observed, and what the
pass has decided so far. Collects actions, events and status changes; turns them into
a Plan at the end. Pure: `now` is given, never read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tfjob.api import constants as c
from tfjob.api.names import replica_key
from tfjob.api.observed import OwnedObject, Pod, Service
from tfjob.api.timestamps import parse_rfc3339, rfc3339
from tfjob.api.types import Job, JobStatus, ReplicaSpec
from tfjob.core import conditions
from tfjob.core import pods as podlib
from tfjob.core.plan import Action, DeleteJob, Event, Plan
from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework
from tfjob.frameworks.registry import framework_of


@dataclass
class Pass:
    job: Job  # defaulted
    framework: Framework[Any]  # the job's kind
    pods: list[Pod]
    services: list[Service]
    now: datetime
    settings: Settings
    status: JobStatus
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    status_first: bool = False
    requeue_after: float | None = None
    # Gang scheduling: the job's group objects as observed, and whether pod creation
    # waits for the scheduler to admit the group (Volcano).
    groups: list[dict[str, Any]] = field(default_factory=list)
    hold_pods: bool = False
    # The objects besides pods and services the job owns, as observed (core/owned.py).
    owned: list[OwnedObject] = field(default_factory=list)
    # The replica specs the pass's pods are made from when not the job's own (an
    # admitted queued job's: core/queued.py); `job` already has them.
    replica_specs: dict[str, ReplicaSpec] | None = None

    @classmethod
    def start(
        cls,
        job: Job,
        pods: list[Pod],
        services: list[Service],
        now: datetime,
        settings: Settings,
    ) -> Pass:
        framework = framework_of(job)
        return cls(job, framework, pods, services, now, settings, copy.deepcopy(job.status))

    @property
    def name(self) -> str:
        return self.job.metadata.name

    @property
    def kind(self) -> str:
        return self.framework.kind

    @property
    def qualified_name(self) -> str:
        return f"{self.job.metadata.namespace}/{self.job.metadata.name}"

    @property
    def stamp(self) -> str:
        return rfc3339(self.now)

    @property
    def start_stamp(self) -> str:
        """`now` rounded up to the whole second, for startTime.

        Kubernetes timestamps have whole seconds. Truncating the start would let
        activeDeadlineSeconds fire up to a second early; rounding up makes it fire
        on time or at most a second late, consistently with the recorded start.
        """
        whole = self.now.replace(microsecond=0)
        return rfc3339(whole if whole == self.now else whole + timedelta(seconds=1))

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append(Event(type=kind, reason=reason, message=message))

    def condition(self, condition_type: str, state: str, reason: str, message: str) -> bool:
        return conditions.set_condition(
            self.status, condition_type, state, reason, message, self.stamp
        )

    def fail(self, reason: str, message: str) -> bool:
        """Set Failed (and completionTime); False if the job had already finished."""
        if not self.condition(c.FAILED, "True", reason, message):
            return False
        self.status.completion_time = self.status.completion_time or self.stamp
        return True

    def succeed(self, message: str) -> bool:
        if not self.condition(c.SUCCEEDED, "True", self.framework.reason("Succeeded"), message):
            return False
        self.status.completion_time = self.status.completion_time or self.stamp
        return True

    def replica_type_of(self, labels: dict[str, str]) -> str:
        """The job's replica-type key for an object's replica-type label ("" if none)."""
        key = labels.get(c.LABEL_REPLICA_TYPE)
        for rtype in self.job.spec.replica_specs:
            if replica_key(rtype) == key:
                return rtype
        return ""

    def restart_policy_of(self, pod: Pod) -> str | None:
        rtype = self.replica_type_of(pod.metadata.labels)
        return self.job.spec.replica_specs[rtype].restart_policy if rtype else None

    def exit_code(self, pod: Pod) -> int:
        """The exit code of the pod's training container (0xbeef if none yet)."""
        return podlib.exit_code(pod, self.framework.container_name)

    def describe_exit(self, pod: Pod) -> str:
        return podlib.describe_exit(pod, self.framework.container_name)

    def deadline(self) -> datetime | None:
        seconds = self.job.spec.run_policy.active_deadline_seconds
        if seconds is None or self.status.start_time is None:
            return None
        return parse_rfc3339(self.status.start_time) + timedelta(seconds=seconds)

    def requeue_at(self, moment: datetime) -> None:
        delay = max((moment - self.now).total_seconds(), 0.0)
        if self.requeue_after is None or delay < self.requeue_after:
            self.requeue_after = delay

    def delete_job(self) -> None:
        self.actions.append(DeleteJob())

    def plan(self, original: JobStatus) -> Plan:
        return Plan(
            actions=self.actions,
            events=self.events,
            status=self.status,
            status_changed=self.status != original,
            requeue_after=self.requeue_after,
            status_first=self.status_first,
            replica_specs=self.replica_specs,
        )
