"""The runtime snapshot: ConfigMap `<tj>-runtime-snapshot`, the runtime as the
TrainJob first used it, under data key `runtime` as YAML written as Go's
sigs.k8s.io/yaml writes it (keys sorted, strings in double quotes, the runtime
through Go's typed structs), owned by the TrainJob. Given the runtime as the API
server returned it, managedFields included, the text is Trainer v2.3.0's to the byte
(checked against a running Trainer).

Trainer builds every later JobSet (a resume, a re-apply while suspended) from the
snapshot, never from the live runtime, so editing a runtime does not change the jobs
already made from it. Trainer v2.3.0 keeps the snapshot even while the TrainJob is
suspended, so a runtime fixed while a job waits (for Kueue, say) is not used when it
resumes. tfjob takes the snapshot again from the live runtime while the TrainJob is
suspended and the runtime's spec differs: the job resumes with the runtime as it is
then. While the TrainJob runs, the snapshot holds.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec
import yaml

from tfjob.api.errors import PermanentError
from tfjob.api.kinds import OwnedKind
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.api.trainjob import API_VERSION, TrainJob, encode
from tfjob.core.trainjob.typed import omitted_empties, with_typed_defaults

SUFFIX = "-runtime-snapshot"
DATA_KEY = "runtime"
CONFIGMAP = OwnedKind(
    group="", version="v1", kind="ConfigMap", plural="configmaps", owned_fields=("data",)
)


class SnapshotError(PermanentError, ValueError):
    """A snapshot ConfigMap that is not this TrainJob's snapshot of its runtime."""


def snapshot_name(trainjob: TrainJob) -> str:
    return f"{trainjob.metadata.name}{SUFFIX}"


#: libyaml's parser when PyYAML has it: every pass of an unfinished TrainJob reads its
#: snapshot (some 5 KB of YAML), and the pure-Python parser took most of the
#: operator's time under cProfile in bench/race_bench.py --kind trainjob (each text
#: is parsed once now: `_parsed`).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _GoYAML(yaml.SafeDumper):
    """PyYAML writing scalars as Go's yaml does: quoted strings in double quotes, and
    y/n (booleans to YAML 1.1) quoted too."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = '"' if data in ("y", "Y", "n", "N") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_GoYAML.add_representer(str, _str)


#: Texts already written, by the runtime's JSON and kind: every TrainJob of a runtime
#: gets the same text, and PyYAML's writer is pure Python (some 2 ms a snapshot).
_WRITTEN: dict[tuple[bytes, str], str] = {}
_REMEMBERED = 64


def runtime_yaml(runtime: TrainingRuntime, kind: str) -> str:
    """The runtime as Trainer writes it: through Go's typed structs (typed.py: empty
    metadata and resources written, empty lists left out, canonical quantities), keys
    sorted, managedFields included when the caller gave them."""
    key = (msgspec.json.encode(runtime), kind)
    text = _WRITTEN.get(key)
    if text is None:
        text = _runtime_yaml(runtime, kind)
        if len(_WRITTEN) >= _REMEMBERED:
            del _WRITTEN[next(iter(_WRITTEN))]
        _WRITTEN[key] = text
    return text


def _runtime_yaml(runtime: TrainingRuntime, kind: str) -> str:
    document = encode(runtime)
    document["apiVersion"] = runtime.api_version or API_VERSION
    document["kind"] = runtime.kind or kind
    document["spec"] = typed_spec(runtime)
    return yaml.dump(document, Dumper=_GoYAML, sort_keys=True, default_flow_style=False)


def typed_spec(runtime: TrainingRuntime) -> dict[str, Any]:
    """The runtime's spec as Go's typed round trip writes it (typed.py)."""
    spec: dict[str, Any] = encode(runtime.spec)
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    with_typed_defaults(template.setdefault("spec", {}))
    kept: dict[str, Any] = omitted_empties(spec)
    return kept


def snapshot_configmap(
    trainjob: TrainJob, runtime: TrainingRuntime, kind: str, owner: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(trainjob),
            "namespace": trainjob.metadata.namespace,
            "ownerReferences": [owner],
        },
        "data": {DATA_KEY: runtime_yaml(runtime, kind)},
    }


def read_snapshot(trainjob: TrainJob, configmap: dict[str, Any]) -> TrainingRuntime:
    """The runtime a snapshot holds; SnapshotError if it is not this TrainJob's (another
    controller owns it, no data, another runtime than spec.runtimeRef names)."""
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is None or controller.get("uid") != trainjob.metadata.uid:
        raise SnapshotError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = (configmap.get("data") or {}).get(DATA_KEY)
    if text is None:
        raise SnapshotError(
            f'invalid runtime snapshot: snapshot ConfigMap missing "{DATA_KEY}" data key'
        )
    runtime = _parsed(text)
    ref = trainjob.spec.runtime_ref
    group = runtime.api_version.split("/")[0] if "/" in runtime.api_version else ""
    if (
        runtime.metadata.name != ref.name
        or runtime.kind != ref.kind_or_default
        or group != ref.group_or_default
    ):
        raise SnapshotError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting "
            f'"{ref.name}", "{ref.group_or_default}", "{ref.kind_or_default}" but found '
            f'"{runtime.metadata.name}", "{group}", "{runtime.kind}"'
        )
    return runtime


@lru_cache(maxsize=_REMEMBERED)
def _parsed(text: str) -> TrainingRuntime:
    """The runtime a snapshot's text holds, each text parsed once: every pass of an
    unfinished TrainJob reads its snapshot, and the snapshots of one runtime's
    TrainJobs are the same text. The runtime returned is shared, as a cached live
    runtime is: nothing changes it (the JobSet is built from copies: patches.py)."""
    try:
        return decode_runtime(yaml.load(text, Loader=_LOADER) or {})
    except (yaml.YAMLError, msgspec.ValidationError) as err:
        raise SnapshotError(
            f"invalid runtime snapshot: unable to unmarshal the snapshot: {err}"
        ) from err


def same_spec(a: TrainingRuntime, b: TrainingRuntime) -> bool:
    """The same spec once both went through Go's typed round trip: a snapshot holds the
    runtime with the empty parts Go writes (`metadata: {}`, `resources: {}`) that the
    live runtime lacks, and is still the same runtime."""
    return typed_spec(a) == typed_spec(b)
