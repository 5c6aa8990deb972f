"""Small builders for jobs and observed pods, so each test states only what matters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api.observed import (
    ContainerState,
    ContainerStatus,
    Meta,
    OwnerReference,
    Pod,
    PodStatus,
    Service,
    Terminated,
)
from tfjob.core.plan import Plan
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TFJob

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
UID = "uid-1"


def container(name: str = "tensorflow", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "tf:1", **extra}


def replica(replicas: int | None = 1, restart: str = "", **template_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container()], **template_spec}
    out: dict[str, Any] = {"template": {"spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    if restart:
        out["restartPolicy"] = restart
    return out


def job(
    name: str = "test-tfjob",
    namespace: str = "default",
    run_policy: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **specs: dict[str, Any],
) -> TFJob:
    """A TFJob whose replica specs are given as keyword arguments (Worker=replica(2))."""
    spec: dict[str, Any] = {"tfReplicaSpecs": specs}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    document: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace, "uid": UID},
        "spec": spec,
    }
    if status is not None:
        document["status"] = status
    return msgspec.convert(document, TFJob)


def with_spec(tfjob: TFJob, **changes: Any) -> TFJob:
    return msgspec.structs.replace(tfjob, spec=msgspec.structs.replace(tfjob.spec, **changes))


def _labels(job_name: str, rtype: str, index: int) -> dict[str, str]:
    """The labels the operator puts on a replica's pod and service (written out here,
    not taken from the core, so the tests do not trust the code they test)."""
    return {
        c.LABEL_OPERATOR_NAME: c.CONTROLLER_NAME,
        c.LABEL_JOB_NAME: job_name,
        c.LABEL_REPLICA_TYPE: rtype,
        c.LABEL_REPLICA_INDEX: str(index),
    }


def pod(
    rtype: str,
    index: int,
    phase: str = "Running",
    *,
    job_name: str = "test-tfjob",
    exit_code: int | None = None,
    reason: str = "",
    restarts: int = 0,
    terminating: bool = False,
    owner: str = UID,
    uid: str = "",
) -> Pod:
    """An observed pod of replica `rtype` (lower-case) and `index`; `uid` defaults to
    one per name (pass another for a recreated pod of the same name)."""
    terminated = Terminated(exit_code=exit_code, reason=reason) if exit_code is not None else None
    statuses = [
        ContainerStatus(
            name="tensorflow", restart_count=restarts, state=ContainerState(terminated=terminated)
        )
    ]
    return Pod(
        metadata=Meta(
            name=f"{job_name}-{rtype}-{index}",
            namespace="default",
            uid=uid or f"uid-{job_name}-{rtype}-{index}",
            labels=_labels(job_name, rtype, index),
            deletion_timestamp="2026-11-30T11:59:00Z" if terminating else None,
            owner_references=(OwnerReference(uid=owner, controller=True, kind="TFJob"),),
        ),
        status=PodStatus(phase=phase, container_statuses=tuple(statuses)),
    )


def pods(rtype: str, count: int, phase: str = "Running", **kw: Any) -> list[Pod]:
    return [pod(rtype, i, phase, **kw) for i in range(count)]


def service(rtype: str, index: int, job_name: str = "test-tfjob", owner: str = UID) -> Service:
    return Service(
        metadata=Meta(
            name=f"{job_name}-{rtype}-{index}",
            namespace="default",
            labels=_labels(job_name, rtype, index),
            owner_references=(OwnerReference(uid=owner, controller=True, kind="TFJob"),),
        )
    )


def services(rtype: str, count: int) -> list[Service]:
    return [service(rtype, i) for i in range(count)]


def run(
    tfjob: TFJob,
    observed_pods: list[Pod] | None = None,
    observed_services: list[Service] | None = None,
    now: datetime = NOW,
    settings: Settings | None = None,
) -> Plan:
    return reconcile(
        tfjob, observed_pods or [], observed_services or [], now, settings or Settings()
    )


def advance(tfjob: TFJob, plan: Plan) -> TFJob:
    """The job as stored after the runtime wrote the plan's status."""
    return msgspec.structs.replace(tfjob, status=plan.status)


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def condition_types(plan: Plan) -> list[tuple[str, str]]:
    return [(cond.type, cond.status) for cond in plan.status.conditions]


def actions_of(plan: Plan, kind: type) -> list[Any]:
    return [a for a in plan.actions if isinstance(a, kind)]
