"""From a container of a pod manifest to the exact process to start.

This is where the local runtime stands in for a container runtime: `image` is ignored,
`command` + `args` run directly (never through a shell), `env` is resolved the way the
kubelet does it (literal values, `$(VAR)` references, the downward API for the fields
that make sense on one machine), and `workingDir` is taken relative to the folder of
the job's YAML file, so a job can ship its scripts next to it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tfjob.api.errors import PermanentError


class LaunchError(PermanentError, ValueError):
    """The container cannot be started locally; the text says why and what to change."""


@dataclass(frozen=True)
class Launch:
    """One process to start: what `asyncio.create_subprocess_exec` needs.

    `argv[0]` is the command as the container writes it and `executable` the file
    found for it, as a container runtime execs it: a program that reads its own
    argv[0] sees the same locally (Open MPI's mpirun, given a full path, prepends that
    prefix's bin to its ranks' PATH, so it could start another `python3`)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path | None
    executable: str | None = None


# Inherited variables that would mislead a replica: the operator owns these.
_NOT_INHERITED = re.compile(r"^(TF_CONFIG|TFJOB_.*)$")
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD_KEY = re.compile(r"""^metadata\.(labels|annotations)\[['"](.+)['"]\]$""")
LOCAL_IP = "127.0.0.1"


def resolve(
    container: Mapping[str, Any],
    metadata: Mapping[str, Any],
    extra_env: Mapping[str, str],
    base_dir: Path,
    not_inherited: tuple[str, ...] = (),
) -> Launch:
    """The process for `container` of the pod described by `metadata`.

    `extra_env` (TFJOB_PORT and friends) comes before the container's own `env`, so
    the container can refer to it as `$(TFJOB_PORT)` and, if it must, override it.
    Of tfjob's own environment, the process inherits all but TF_CONFIG, TFJOB_* and
    the names matching `not_inherited` (the kind's own, `Framework.owned_env`).
    """
    declared = declared_env(container, metadata, extra_env)
    cwd = working_dir(container, base_dir)
    command = [expand(str(a), declared) for a in container.get("command") or []]
    args = [expand(str(a), declared) for a in container.get("args") or []]
    if not command:
        raise LaunchError(NO_COMMAND)
    env = {
        k: v
        for k, v in os.environ.items()
        if not _NOT_INHERITED.match(k) and not any(fnmatchcase(k, p) for p in not_inherited)
    }
    env["PATH"] = replica_path(env.get("PATH", ""))
    env.update(declared)
    executable = find_executable(command[0], env.get("PATH", ""), cwd)
    if executable is None:
        raise LaunchError(not_found_message(command[0]))
    return Launch(argv=[*command, *args], env=env, cwd=cwd, executable=executable)


NO_COMMAND = "no command: a local replica cannot use the image's entrypoint"


def replica_path(inherited: str) -> str:
    """The PATH a replica inherits: tfjob's, with the folder of the interpreter tfjob
    runs in first when it is not on it already. So `python3`, `torchrun` and the rest
    of tfjob's virtualenv are the replica's even when that venv is not activated
    (`/venv/bin/tfjob run job.yaml` from a plain shell would otherwise start the
    system's python3, without the venv's torch). A container's own `PATH` in its
    `env` still wins."""
    folder = os.path.dirname(sys.executable)
    entries = inherited.split(os.pathsep) if inherited else []
    if not folder or folder in entries:
        return inherited
    return os.pathsep.join([folder, *entries])


def not_found_message(name: str) -> str:
    return f'"{name}" is not an executable on PATH (nor a path to one)'


def declared_env(
    container: Mapping[str, Any], metadata: Mapping[str, Any], extra_env: Mapping[str, str]
) -> dict[str, str]:
    """`extra_env` then the container's `env`, in order, references expanded."""
    env = dict(extra_env)
    for entry in container.get("env") or []:
        name = str(entry.get("name", ""))
        if "valueFrom" in entry:
            env[name] = _value_from(entry["valueFrom"], metadata)
        else:
            env[name] = expand(str(entry.get("value", "")), env)
    return env


def unsupported_env(container: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(sub-path, reason) for each env source that cannot be resolved locally."""
    problems = []
    if container.get("envFrom"):
        problems.append(("envFrom", "configMap and secret sources are not available locally"))
    for i, entry in enumerate(container.get("env") or []):
        source = entry.get("valueFrom") if isinstance(entry, Mapping) else None
        if source is None:
            continue
        try:
            _value_from(source, {})
        except LaunchError as error:
            problems.append((f"env[{i}].valueFrom", str(error)))
    return problems


def _value_from(source: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
    field_ref = source.get("fieldRef")
    if set(source) != {"fieldRef"} or not isinstance(field_ref, Mapping):
        kinds = ", ".join(sorted(source)) or "nothing"
        raise LaunchError(
            f"{kinds} is not supported locally; only fieldRef to metadata.name, "
            "metadata.namespace, metadata.uid, metadata.labels['k'], "
            "metadata.annotations['k'], status.podIP and status.hostIP"
        )
    path = str(field_ref.get("fieldPath", ""))
    if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return str(metadata.get(path.split(".")[1], ""))
    if path in ("status.podIP", "status.hostIP"):
        return LOCAL_IP
    match = _FIELD_KEY.match(path)
    if match:
        return str((metadata.get(match.group(1)) or {}).get(match.group(2), ""))
    raise LaunchError(f"fieldRef.fieldPath {path!r} is not supported locally")


def field_value(source: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
    """The value a `valueFrom` source gives a pod with `metadata`, as launched here."""
    return _value_from(source, metadata)


def references(text: str) -> set[str]:
    """The names `text` refers to as `$(NAME)`."""
    return {m.group(1) for m in _REFERENCE.finditer(text) if m.group(1) is not None}


def substitute(text: str, env: Mapping[str, str]) -> str:
    """`text` with the `$(VAR)` references `env` knows replaced by their values, still a
    value to expand: other references stay, as do `$$`, and a `$` of a value doubles,
    so that `expand` later gives what expanding `text` at once would."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None or name not in env:
            return match.group(0)
        return env[name].replace("$", "$$")

    return _REFERENCE.sub(replace, text)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: known names are replaced, `$$` escapes a `$`."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


def working_dir(container: Mapping[str, Any], base_dir: Path) -> Path | None:
    """`workingDir`, relative to `base_dir` (the YAML's folder); None: tfjob's own cwd."""
    raw = container.get("workingDir")
    return None if not raw else base_dir / str(raw)


def find_executable(name: str, path: str, cwd: Path | None) -> str | None:
    """`name` looked up on `path` as execvp would, or taken as a path if it has a `/`."""
    if "/" in name:
        candidate = Path(name) if Path(name).is_absolute() else (cwd or Path.cwd()) / name
        ok = candidate.is_file() and os.access(candidate, os.X_OK)
        return str(candidate) if ok else None
    return shutil.which(name, path=path)
