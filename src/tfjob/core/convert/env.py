"""The env a v1 kind gives its pods, said once for a whole replicated job.

A v1 operator writes each pod's env itself (TF_CONFIG, MASTER_ADDR, RANK, ...); a
JobSet's pods all come from one template. A variable has a template form when, with
every v1 pod address rewritten to the JobSet pod it becomes, it is the same in every
pod (a value), or it is each pod's completion index (a fieldRef on the index
annotation). Any other variable (TF_CONFIG, whose task index sits inside JSON) has
none: it is lost, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfjob.api.names import object_name
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.framework import EnvVar
from tfjob.frameworks.mlpolicy.base import env_index

#: A v1 pod: its replica type and index.
Slot = tuple[str, int]


@dataclass(frozen=True)
class Derived:
    env: list[dict[str, Any]]
    losses: list[Loss]


def address_rewriter(job_name: str, addresses: dict[Slot, str]) -> Callable[[str], str]:
    """A function replacing every v1 pod name (`<job>-<type>-<i>`, with its service
    domain if any) in a string with the address its JobSet pod has."""
    by_name = {object_name(job_name, t, i): new for (t, i), new in addresses.items()}
    if not by_name:
        return lambda value: value
    names = sorted(by_name, key=len, reverse=True)
    # A v1 address may go on with `.<namespace>.svc[.<cluster domain>]`: replaced too.
    pattern = re.compile(
        "(?<![0-9A-Za-z-])("
        + "|".join(re.escape(n) for n in names)
        + r")(?:\.[0-9a-z-]*\.svc(?:\.[0-9A-Za-z-]+)*)?(?![0-9A-Za-z-])"
    )
    return lambda value: pattern.sub(lambda m: by_name[m.group(1)], value)


def derive(
    per_pod: Sequence[Sequence[EnvVar]],
    rewrite: Callable[[str], str],
    path: str,
    own: Sequence[str],
) -> Derived:
    """One template env for pods whose completion index is their position in `per_pod`
    and whose addresses are `own`.

    A variable read from the pod itself (a fieldRef) means the same in every pod, so
    it is kept where any pod has it; a `$(V)` naming the pod's IP that way is compared
    as the pod's own address (PaddleJob gives its first pod `$(POD_IP_DUMMY):port`
    and the others that pod's name and port: the same place)."""
    rewritten = [
        [_rewritten(var, rewrite, _own_ip(env, address)) for var in env]
        for env, address in zip(per_pod, own, strict=True)
    ]
    names = list(dict.fromkeys(str(var["name"]) for env in rewritten for var in env))
    env: list[dict[str, Any]] = []
    losses: list[Loss] = []
    for name in names:
        values = [next((v for v in pod if v["name"] == name), None) for pod in rewritten]
        first = values[0]
        present = [v for v in values if v is not None]
        if first is not None and all(v == first for v in values):
            env.append(first)
        elif "valueFrom" in present[0] and all(v == present[0] for v in present):
            env.append(present[0])
        elif all(v is not None and v.get("value") == str(k) for k, v in enumerate(values)):
            env.append(env_index(name))
        else:
            losses.append(
                Loss(
                    f"{path}.env[{name}]",
                    "the operator's value differs from pod to pod otherwise than by the "
                    "pod's index: a pod template cannot say it",
                )
            )
    return Derived(env=env, losses=losses)


def _own_ip(env: Sequence[EnvVar], address: str) -> dict[str, str]:
    """`$(V)` -> the pod's address, for each V holding the pod's IP."""
    return {
        f"$({var['name']})": address
        for var in env
        if ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "status.podIP"
    }


def _rewritten(
    var: EnvVar, rewrite: Callable[[str], str], own_ip: dict[str, str]
) -> dict[str, Any]:
    copied = dict(var)
    if isinstance(copied.get("value"), str):
        value = rewrite(copied["value"])
        for reference, address in own_ip.items():
            value = value.replace(reference, address)
        copied["value"] = value
    return copied
