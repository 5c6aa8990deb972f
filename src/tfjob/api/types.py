"""Typed model of the kubeflow.org/v1 jobs, decoded with msgspec.

What every kind shares (metadata, runPolicy, replica specs, status) is here, with the
bases `Job` and `JobSpec` the core works on; each kind's own struct, in its framework
file (`tfjob.frameworks.tensorflow.TFJob`, ...), names its replica-specs field and adds
its extra fields.

The pod template is kept as the plain mapping the user wrote, so fields this model does
not know (volumes, probes, anything a newer Kubernetes adds) survive a round trip
untouched. Everything else is typed, with the API's camelCase names on the wire.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from tfjob.api.wire import Wire


class ObjectMeta(Wire):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class SchedulingPolicy(Wire):
    min_available: int | None = None
    queue: str = ""
    min_resources: dict[str, Any] | None = None
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None


class RunPolicy(Wire):
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class ReplicaSpec(Wire):
    replicas: int | None = None
    template: dict[str, Any] = {}
    restart_policy: str = ""


class JobSpec(Wire):
    """What every kind's spec has. A kind's spec adds its replica-specs field (e.g.
    `tfReplicaSpecs`) and its own fields, and names that field `REPLICA_SPECS`."""

    run_policy: RunPolicy = msgspec.field(default_factory=RunPolicy)
    # tfjob extension: the controller that reconciles the job, at the place Kueue's
    # MultiKueue reads it for an external framework (`spec.managedBy`, Kueue v0.19.0
    # multikueue/externalframeworks adapter.go); core/reconcile.py says what it means.
    managed_by: str | None = None

    #: The Python name of the kind's replica-specs field.
    REPLICA_SPECS: ClassVar[str] = ""

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The replica specs by type, whatever the kind calls the field."""
        specs: dict[str, ReplicaSpec] = getattr(self, self.REPLICA_SPECS)
        return specs


class JobCondition(Wire):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_update_time: str | None = None
    last_transition_time: str | None = None


class ReplicaStatus(Wire):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    label_selector: dict[str, Any] | None = None
    selector: str | None = None


class JobStatus(Wire):
    conditions: list[JobCondition] = []
    replica_statuses: dict[str, ReplicaStatus] = {}
    start_time: str | None = None
    completion_time: str | None = None
    last_reconcile_time: str | None = None
    # tfjob extension: restarts the operator made (pod recreations plus the in-place
    # restarts of the pods it replaced). Kept in status so that backoffLimit counts
    # every restart and survives operator restarts (upstream #2342, #1589).
    restart_count: int = 0
    # tfjob extension: UIDs of the failed pods already counted in `restart_count`
    # whose replacement is under way; a UID leaves once its pod is gone. Why it makes
    # each failure count once: docs/consistency.md.
    counted_pods: list[str] = []


class Job(Wire):
    """Any kind's job: the core decides on this; a kind's struct narrows `spec`."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)


def to_dict(obj: msgspec.Struct) -> dict[str, Any]:
    """The object as plain JSON-ready data, in the API's wire form."""
    data = msgspec.to_builtins(obj)
    assert isinstance(data, dict)
    return data
