"""Defaulting: the in-memory view of a job the core decides on.

Defaults are never written back to the stored spec (upstream writes status only), so
this returns a new object and leaves the caller's untouched.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api.containers import tensorflow_container
from tfjob.api.names import canonical_type
from tfjob.api.types import ReplicaSpec, TFJob


def with_defaults(job: TFJob) -> TFJob:
    """A copy of `job` with every upstream default applied, in upstream's order."""
    run_policy = msgspec.structs.replace(
        job.spec.run_policy,
        clean_pod_policy=job.spec.run_policy.clean_pod_policy or "None",
    )
    specs = {
        key: _default_replica(spec)
        for key, spec in normalise_types(job.spec.tf_replica_specs).items()
    }
    spec = msgspec.structs.replace(
        job.spec,
        run_policy=run_policy,
        success_policy=job.spec.success_policy or "",
        tf_replica_specs=specs,
    )
    return msgspec.structs.replace(job, spec=spec)


def normalise_types(specs: dict[str, ReplicaSpec]) -> dict[str, ReplicaSpec]:
    """Rename replica-type keys to their canonical case (`worker` -> `Worker`).

    As upstream: per canonical type, the first differently-cased key found in map
    order is renamed and replaces an exact-case entry; other variants stay behind as
    unknown types (validation reports them).
    """
    result = dict(specs)
    for key in list(specs):
        canonical = canonical_type(key)
        if canonical is None or canonical == key or key not in result:
            continue
        if any(
            k != key and k != canonical and canonical_type(k) == canonical
            for k in _before(specs, key)
        ):
            continue
        result[canonical] = result.pop(key)
    return result


def _before(specs: dict[str, ReplicaSpec], key: str) -> list[str]:
    keys = list(specs)
    return keys[: keys.index(key)]


def _default_replica(spec: ReplicaSpec) -> ReplicaSpec:
    return msgspec.structs.replace(
        spec,
        replicas=1 if spec.replicas is None else spec.replicas,
        restart_policy=spec.restart_policy or c.DEFAULT_RESTART_POLICY,
        template=_with_default_port(spec.template),
    )


def _with_default_port(template: dict[str, Any]) -> dict[str, Any]:
    """Add `tfjob-port: 2222` to the tensorflow container (or the first) if missing."""
    containers = template.get("spec", {}).get("containers")
    if not isinstance(containers, list) or not containers:
        return template
    template = copy.deepcopy(template)
    containers = template["spec"]["containers"]
    target = tensorflow_container(template["spec"]) or containers[0]
    if not isinstance(target, dict):
        return template
    ports = target.setdefault("ports", [])
    if not any(isinstance(p, dict) and p.get("name") == c.DEFAULT_PORT_NAME for p in ports):
        ports.append({"name": c.DEFAULT_PORT_NAME, "containerPort": c.DEFAULT_PORT})
    return template
