"""Defaulting every kind shares: cleanPodPolicy, replica-type case, replicas,
restartPolicy and the default port. A kind adds its own defaults in its framework
(`tfjob.frameworks`), whose `with_defaults` applies both in upstream's order.

Defaults are never written back to the stored spec (upstream writes status only), so
these return new objects and leave the caller's untouched.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from tfjob.api.containers import named_container
from tfjob.api.kinds import KindDeclaration
from tfjob.api.types import ReplicaSpec, RunPolicy


def default_run_policy(policy: RunPolicy) -> RunPolicy:
    """cleanPodPolicy None unless set."""
    return msgspec.structs.replace(policy, clean_pod_policy=policy.clean_pod_policy or "None")


def default_replica_specs(
    specs: dict[str, ReplicaSpec], kind: KindDeclaration
) -> dict[str, ReplicaSpec]:
    """Canonical type keys, then each replica's replicas, restartPolicy and port."""
    return {
        key: _default_replica(key, spec, kind) for key, spec in normalise_types(specs, kind).items()
    }


def normalise_types(specs: dict[str, ReplicaSpec], kind: KindDeclaration) -> dict[str, ReplicaSpec]:
    """Rename replica-type keys to their canonical case (`worker` -> `Worker`).

    As upstream: per canonical type, the first differently-cased key found in map
    order is renamed and replaces an exact-case entry; other variants stay behind as
    unknown types (validation reports them).
    """
    result = dict(specs)
    for key in list(specs):
        canonical = kind.canonical_type(key)
        if canonical is None or canonical == key or key not in result:
            continue
        if any(
            k != key and k != canonical and kind.canonical_type(k) == canonical
            for k in _before(specs, key)
        ):
            continue
        result[canonical] = result.pop(key)
    return result


def _before(specs: dict[str, ReplicaSpec], key: str) -> list[str]:
    keys = list(specs)
    return keys[: keys.index(key)]


def _default_replica(key: str, spec: ReplicaSpec, kind: KindDeclaration) -> ReplicaSpec:
    template = _with_default_port(spec.template, kind) if kind.default_port else spec.template
    return msgspec.structs.replace(
        spec,
        replicas=kind.default_replicas(key) if spec.replicas is None else spec.replicas,
        restart_policy=spec.restart_policy or kind.default_restart_policy,
        template=template,
    )


def _with_default_port(template: dict[str, Any], kind: KindDeclaration) -> dict[str, Any]:
    """Add the kind's port (`tfjob-port: 2222`) to its training container (or the
    first container) if that has no port of that name."""
    containers = template.get("spec", {}).get("containers")
    if not isinstance(containers, list) or not containers:
        return template
    template = copy.deepcopy(template)
    containers = template["spec"]["containers"]
    target = named_container(template["spec"], kind.container_name) or containers[0]
    if not isinstance(target, dict):
        return template
    ports = target.setdefault("ports", [])
    if not any(isinstance(p, dict) and p.get("name") == kind.port_name for p in ports):
        ports.append({"name": kind.port_name, "containerPort": kind.port})
    return template
