"""Validation (upstream's webhook checks, plus the ones it lacks): every problem, at once.

Runs on the job as stored (before defaulting), like upstream's webhook. Beyond the
webhook it rejects what would otherwise fail later or silently: unknown restart or
clean-pod policies, negative counts, replica-type keys that collide by case, and
generated names that do not fit Kubernetes' 63-character limit (upstream #1101).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tfjob.api import constants as c
from tfjob.api.errors import FieldError
from tfjob.api.names import canonical_type, object_name
from tfjob.api.types import ReplicaSpec, TFJob

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def validate(job: TFJob, *, require_image: bool = True) -> list[FieldError]:
    """All problems in `job`; an empty list means the job can run."""
    return [
        *_check_name(job.metadata.name),
        *_check_run_policy(job),
        *_check_success_policy(job.spec.success_policy),
        *_check_replica_specs(job, require_image=require_image),
    ]


def _check_name(name: str) -> Iterator[FieldError]:
    if not name:
        yield FieldError("metadata.name", "is required", "give the TFJob a name")
    elif len(name) > c.MAX_NAME_LENGTH or not _DNS1035.match(name):
        yield FieldError(
            "metadata.name",
            f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
            f"starting with a letter, ending with a letter or digit, at most "
            f"{c.MAX_NAME_LENGTH} characters)",
            "rename the job, e.g. 'mnist-train'",
        )


def _check_run_policy(job: TFJob) -> Iterator[FieldError]:
    policy = job.spec.run_policy
    path = "spec.runPolicy"
    if policy.managed_by is not None and policy.managed_by not in c.MANAGED_BY_VALUES:
        yield FieldError(
            f"{path}.managedBy",
            f"unsupported value {policy.managed_by!r}",
            f"use one of {', '.join(repr(v) for v in c.MANAGED_BY_VALUES)} or leave it unset",
        )
    if policy.clean_pod_policy is not None and policy.clean_pod_policy not in c.CLEAN_POD_POLICIES:
        yield FieldError(
            f"{path}.cleanPodPolicy",
            f"unknown value {policy.clean_pod_policy!r}",
            f"use one of {', '.join(c.CLEAN_POD_POLICIES)}",
        )
    for field, value in (
        ("backoffLimit", policy.backoff_limit),
        ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", policy.active_deadline_seconds),
    ):
        if value is not None and value < 0:
            yield FieldError(
                f"{path}.{field}", f"must be >= 0, got {value}", f"set {field} to 0 or more"
            )


def _check_success_policy(success_policy: str | None) -> Iterator[FieldError]:
    if success_policy not in (None, *c.SUCCESS_POLICIES):
        yield FieldError(
            "spec.successPolicy",
            f"unknown value {success_policy!r}",
            'use "" (chief or worker 0 decides) or "AllWorkers"',
        )


def _check_replica_specs(job: TFJob, *, require_image: bool) -> Iterator[FieldError]:
    specs = job.spec.tf_replica_specs
    if not specs:
        yield FieldError(
            "spec.tfReplicaSpecs",
            "is required and must name at least one replica type",
            "add e.g. a Worker replica spec with a container named 'tensorflow'",
        )
        return
    yield from _check_type_keys(specs)
    for key, spec in specs.items():
        yield from _check_replica(job.metadata.name, key, spec, require_image=require_image)


def _check_type_keys(specs: dict[str, ReplicaSpec]) -> Iterator[FieldError]:
    by_type: dict[str, list[str]] = {}
    for key in specs:
        by_type.setdefault(canonical_type(key) or key, []).append(key)
    for canonical, keys in by_type.items():
        if len(keys) > 1:
            yield FieldError(
                "spec.tfReplicaSpecs",
                f"keys {', '.join(repr(k) for k in keys)} name the same replica type {canonical!r}",
                "keep one of them",
            )
    if len(by_type.get(c.CHIEF, [])) + len(by_type.get(c.MASTER, [])) > 1 or (
        c.CHIEF in by_type and c.MASTER in by_type
    ):
        yield FieldError(
            "spec.tfReplicaSpecs",
            "must not have more than 1 Chief or Master role",
            "keep either Chief or Master (they mean the same)",
        )


def _check_replica(
    job_name: str, key: str, spec: ReplicaSpec, *, require_image: bool
) -> Iterator[FieldError]:
    path = f"spec.tfReplicaSpecs[{key}]"
    if spec.replicas is not None and spec.replicas < 0:
        yield FieldError(
            f"{path}.replicas", f"must be >= 0, got {spec.replicas}", "set replicas to 0 or more"
        )
    if spec.restart_policy and spec.restart_policy not in c.RESTART_POLICIES:
        yield FieldError(
            f"{path}.restartPolicy",
            f"unknown value {spec.restart_policy!r}",
            f"use one of {', '.join(c.RESTART_POLICIES)}",
        )
    yield from _check_generated_names(job_name, key, spec, path)
    yield from _check_containers(spec.template, f"{path}.template.spec.containers", require_image)


def _check_generated_names(
    job_name: str, key: str, spec: ReplicaSpec, path: str
) -> Iterator[FieldError]:
    if not job_name:
        return
    last = max((spec.replicas if spec.replicas is not None else 1) - 1, 0)
    name = object_name(job_name, key, last)
    if len(name) > c.MAX_NAME_LENGTH:
        yield FieldError(
            path,
            f"generated pod/service name {name!r} is {len(name)} characters, over "
            f"Kubernetes' limit of {c.MAX_NAME_LENGTH}",
            f"shorten metadata.name to at most "
            f"{c.MAX_NAME_LENGTH - (len(name) - len(job_name))} characters",
        )
    elif not _DNS1035.match(name):
        yield FieldError(
            path,
            f"replica type {key!r} gives the service name {name!r}, which is not a DNS-1035 label",
            "use a replica type made of letters and digits (PS, Worker, Chief, Master, Evaluator)",
        )


def _check_containers(
    template: dict[str, Any], path: str, require_image: bool
) -> Iterator[FieldError]:
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    if not isinstance(containers, list) or not containers:
        yield FieldError(path, "must be specified", "add a container named 'tensorflow'")
        yield FieldError(
            path,
            f"must have at least one container with name {c.DEFAULT_CONTAINER_NAME}",
            f"name the training container '{c.DEFAULT_CONTAINER_NAME}'",
        )
        return
    for index, container in enumerate(containers):
        if not isinstance(container, dict):
            yield FieldError(
                f"{path}[{index}]", "must be a mapping", "write the container as name/image/command"
            )
        elif require_image and not container.get("image"):
            yield FieldError(
                f"{path}[{index}].image", "must be required", "set the container image"
            )
    names = [ct.get("name") for ct in containers if isinstance(ct, dict)]
    if c.DEFAULT_CONTAINER_NAME not in names:
        found = ", ".join(repr(n) for n in names)
        yield FieldError(
            path,
            f"must have at least one container with name {c.DEFAULT_CONTAINER_NAME} "
            f"(found {found})",
            f"name the training container '{c.DEFAULT_CONTAINER_NAME}'",
        )
