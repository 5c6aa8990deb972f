"""Comparing tfjob's rendered objects with the ones Kubeflow's operator created, for
the parity tests (tests/kubernetes/operator/test_*_parity.py).

tfjob's objects go through a server-side dry run first, so what the API server adds
(defaults, uid, timestamps) is added to both sides the same way; only metadata and
spec are compared, without what the server sets on its own.
"""

from __future__ import annotations

from typing import Any

from lightkube import Client, codecs

# Metadata the API server sets on every object it stores.
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def as_stored(kube: Client, manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server would store it: a server-side dry run, under
    another name (the real name is Kubeflow's object's, and a dry run checks it)."""
    name = manifest["metadata"]["name"]
    dry = {**manifest, "metadata": {**manifest["metadata"], "name": f"{name}-dry"}}
    stored: dict[str, Any] = kube.create(codecs.from_dict(dry), dry_run=True).to_dict()
    stored["metadata"]["name"] = name
    return stored


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """Metadata and spec, without what the API server sets on its own."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    return {"metadata": metadata, "spec": obj["spec"]}


def differences(upstream: Any, ours: Any, path: str = "") -> list[str]:
    """Every path where the two differ, with both values (lists compared in order)."""
    if isinstance(upstream, dict) and isinstance(ours, dict):
        found: list[str] = []
        for key in sorted(set(upstream) | set(ours)):
            if key not in ours or key not in upstream:
                found.append(
                    f"{path}.{key}: Kubeflow {upstream.get(key)!r}, tfjob {ours.get(key)!r}"
                )
            else:
                found += differences(upstream[key], ours[key], f"{path}.{key}")
        return found
    if isinstance(upstream, list) and isinstance(ours, list) and len(upstream) == len(ours):
        return [
            d
            for i, (a, b) in enumerate(zip(upstream, ours, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if upstream == ours else [f"{path}: Kubeflow {short(upstream)}, tfjob {short(ours)}"]


def short(value: Any) -> str:
    """An env list as NAME=value entries, anything else as it is."""
    if isinstance(value, list) and all(
        isinstance(v, dict) and "name" in v and set(v) <= {"name", "value"} for v in value
    ):
        return repr([f"{v['name']}={v.get('value', '')}" for v in value])
    return repr(value)


def report(theirs: dict[str, dict[str, Any]], ours: dict[str, dict[str, Any]]) -> str:
    """Every difference of each object, one a line; empty when they are equal."""
    return "\n".join(
        f"{name}{difference}"
        for name in sorted(theirs)
        for difference in differences(comparable(theirs[name]), comparable(ours[name]))
    )
