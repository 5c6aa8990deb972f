"""Validation every kind shares (upstream's webhook checks, plus the ones it lacks).

Runs on the job as stored (before defaulting), like upstream's webhook. Beyond the
webhook it rejects what would otherwise fail later or silently: unknown restart or
clean-pod policies, negative counts, replica-type keys that collide by case, and
generated names that do not fit Kubernetes' 63-character limit (upstream #1101).
A kind's framework adds its own checks (`tfjob.frameworks`); its `validate` returns
every problem of both, at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tfjob.api import constants as c
from tfjob.api.errors import FieldError
from tfjob.api.kinds import KindDeclaration
from tfjob.api.names import object_name
from tfjob.api.types import Job, ReplicaSpec

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def check_job(job: Job, kind: KindDeclaration) -> Iterator[FieldError]:
    """The job's name and runPolicy."""
    yield from _check_name(job.metadata.name, kind)
    yield from _check_run_policy(job)


def check_replica_specs(
    job: Job, kind: KindDeclaration, *, require_image: bool
) -> Iterator[FieldError]:
    """The replica specs: at least one, no two keys of one type, and each replica's
    count, restart policy, generated names and containers."""
    specs = job.spec.replica_specs
    if not specs:
        yield FieldError(
            f"spec.{kind.spec_field}",
            "is required and must name at least one replica type",
            f"add e.g. a Worker replica spec with a container named '{kind.container_name}'",
        )
        return
    yield from _check_type_keys(specs, kind)
    for key, spec in specs.items():
        yield from _check_replica(job.metadata.name, key, spec, kind, require_image=require_image)


def _check_name(name: str, kind: KindDeclaration) -> Iterator[FieldError]:
    if not name:
        yield FieldError("metadata.name", "is required", f"give the {kind.kind} a name")
    elif len(name) > c.MAX_NAME_LENGTH or not _DNS1035.match(name):
        yield FieldError(
            "metadata.name",
            f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
            f"starting with a letter, ending with a letter or digit, at most "
            f"{c.MAX_NAME_LENGTH} characters)",
            "rename the job, e.g. 'mnist-train'",
        )


def _check_run_policy(job: Job) -> Iterator[FieldError]:
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


def keys_by_type(specs: dict[str, ReplicaSpec], kind: KindDeclaration) -> dict[str, list[str]]:
    """The spec keys by canonical type (an unknown type's key stands for itself)."""
    by_type: dict[str, list[str]] = {}
    for key in specs:
        by_type.setdefault(kind.canonical_type(key) or key, []).append(key)
    return by_type


def _check_type_keys(specs: dict[str, ReplicaSpec], kind: KindDeclaration) -> Iterator[FieldError]:
    by_type = keys_by_type(specs, kind)
    for canonical, keys in by_type.items():
        if len(keys) > 1:
            yield FieldError(
                f"spec.{kind.spec_field}",
                f"keys {', '.join(repr(k) for k in keys)} name the same replica type {canonical!r}",
                "keep one of them",
            )
    if kind.unknown_type_hint:
        for canonical, keys in by_type.items():
            if canonical not in kind.replica_types:
                yield FieldError(
                    f"spec.{kind.spec_field}[{keys[0]}]",
                    f"unsupported replica type {keys[0]!r}",
                    kind.unknown_type_hint,
                )
    yield from kind.check_types(by_type)


def _check_replica(
    job_name: str, key: str, spec: ReplicaSpec, kind: KindDeclaration, *, require_image: bool
) -> Iterator[FieldError]:
    path = f"spec.{kind.spec_field}[{key}]"
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
    yield from _check_generated_names(job_name, key, spec, path, kind)
    yield from _check_containers(
        spec.template,
        f"{path}.template.spec.containers",
        kind.container_name if kind.requires_named_container else None,
        require_image,
    )


def _check_generated_names(
    job_name: str, key: str, spec: ReplicaSpec, path: str, kind: KindDeclaration
) -> Iterator[FieldError]:
    if not job_name:
        return
    last = max((spec.replicas if spec.replicas is not None else 1) - 1, 0)
    canonical = kind.canonical_type(key)
    name = (
        kind.pod_name(job_name, canonical, last) if canonical else object_name(job_name, key, last)
    )
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
            f"use a replica type made of letters and digits ({', '.join(kind.example_types)})",
        )


def _check_containers(
    template: dict[str, Any], path: str, name: str | None, require_image: bool
) -> Iterator[FieldError]:
    """`name`: the container every replica must have (None: any)."""
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    if not isinstance(containers, list) or not containers:
        if name is None:
            yield FieldError(path, "must be specified", "add the container that runs the job")
            return
        yield FieldError(path, "must be specified", f"add a container named '{name}'")
        yield FieldError(
            path,
            f"must have at least one container with name {name}",
            f"name the training container '{name}'",
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
    if name is not None and name not in names:
        found = ", ".join(repr(n) for n in names)
        yield FieldError(
            path,
            f"must have at least one container with name {name} (found {found})",
            f"name the training container '{name}'",
        )
