"""What must hold before a job can run locally, checked before anything starts.

Validation (tfjob.api) says whether a job is valid at all; this says whether this
machine can run it: every container needs a `command` (there is no image whose
entrypoint could be used) that names an executable, its `workingDir` must exist, and
its environment must come from sources that exist locally, and the job must not have
more replicas than one machine can run as processes. Problems are reported in
the API's FieldError form so they read like, and are shown with, validation errors.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tfjob.api.errors import FieldError
from tfjob.api.types import Job
from tfjob.core.objects import desired_pod
from tfjob.core.settings import Settings
from tfjob.frameworks.registry import framework_of, with_defaults
from tfjob.runtimes.local import launch

#: More replicas than this cannot run as processes on one machine (each also needs
#: its own local port); without a bound a job of 2**31 replicas spins planning them.
MAX_LOCAL_REPLICAS = 4096


def check(job: Job, base_dir: Path) -> tuple[list[FieldError], list[str]]:
    """(errors that stop the run, warnings about what the local run leaves out)."""
    framework = framework_of(job)
    if framework.local_refusal:
        fix = f"run the {framework.kind} on Kubernetes (tfjob submit, or the operator)"
        return [FieldError("kind", framework.local_refusal, fix)], []
    errors: list[FieldError] = list(_check_size(job)) + list(_check_programs(job))
    warnings: list[str] = []
    if errors:
        return errors, warnings
    field = framework_of(job).spec_field
    defaulted = with_defaults(job)
    for key, spec in job.spec.replica_specs.items():
        if spec.replicas == 0:
            continue
        pod_spec = spec.template.get("spec") or {}
        path = f"spec.{field}[{key}].template.spec"
        if pod_spec.get("initContainers"):
            warnings.append(f"{path}.initContainers: init containers are not run locally")
        containers = pod_spec.get("containers") or []
        added: dict[int, dict[str, Any]] = {}
        if any(isinstance(ct, dict) and not ct.get("command") for ct in containers):
            added = _added_commands(defaulted, key)
        for index, container in enumerate(containers):
            where = f"{path}.containers[{index}]"
            if isinstance(container, dict) and not container.get("command") and index in added:
                container = {**container, **added[index]}
            errors += _check_container(container, where, base_dir)
    return errors, warnings + list(_added_init_containers(job))


def _check_programs(job: Job) -> Iterator[FieldError]:
    """The programs the kind needs on this machine (MPIJob: `mpirun`)."""
    framework = framework_of(job)
    for program, fix in framework.local_programs:
        if shutil.which(program, path=launch.replica_path(os.environ.get("PATH", ""))) is None:
            yield FieldError(
                "kind",
                f"a local {framework.kind} needs {program!r}, which is not on PATH",
                fix,
            )


def _added_commands(job: Job, key: str) -> dict[int, dict[str, Any]]:
    """The command (and args) the kind gives a container that has none, by index
    (MPIJob's Workers: `sleep 365d`): what runs, so what must exist here."""
    if key not in job.spec.replica_specs:
        return {}
    pod = desired_pod(job, key, 0, Settings())
    return {
        index: {"command": container["command"], "args": container.get("args") or []}
        for index, container in enumerate(pod["spec"].get("containers") or [])
        if isinstance(container, dict) and container.get("command")
    }


def _added_init_containers(job: Job) -> Iterator[str]:
    """A note for each init container the job's kind adds to its pods on a cluster
    (PyTorchJob's `init-pytorch`, which holds a Worker until the Master's name
    resolves): the local runtime runs none, since every replica starts in the same
    pass on this machine and reaches the others at 127.0.0.1."""
    framework = framework_of(job)
    defaulted = with_defaults(job)
    for key, spec in defaulted.spec.replica_specs.items():
        if not spec.replicas:
            continue
        declared = spec.template.get("spec") or {}
        own = {ct.get("name") for ct in declared.get("initContainers") or []}
        pod = desired_pod(defaulted, key, 0, Settings())
        for container in pod["spec"].get("initContainers") or []:
            if container.get("name") not in own:
                yield (
                    f"{framework.kind} {key} pods: the init container "
                    f"{container.get('name')} a cluster adds is not run locally "
                    f"({framework.local_init_reason})"
                )


def _check_size(job: Job) -> Iterator[FieldError]:
    specs = job.spec.replica_specs
    total = sum(
        max(spec.replicas if spec.replicas is not None else 1, 0) for spec in specs.values()
    )
    if total <= MAX_LOCAL_REPLICAS:
        return
    key = max(specs, key=lambda k: specs[k].replicas or 0)
    yield FieldError(
        f"spec.{framework_of(job).spec_field}[{key}].replicas",
        f"{total} replicas in all cannot run as processes on one machine "
        f"(tfjob run starts at most {MAX_LOCAL_REPLICAS})",
        "run the job on Kubernetes, or lower replicas",
    )


def _check_container(
    container: Mapping[str, Any], where: str, base_dir: Path
) -> Iterator[FieldError]:
    for sub_path, reason in launch.unsupported_env(container):
        yield FieldError(f"{where}.{sub_path}", reason, "set the value literally with `value:`")
    cwd = launch.working_dir(container, base_dir)
    if cwd is not None and not cwd.is_dir():
        yield FieldError(
            f"{where}.workingDir",
            f"{str(cwd)!r} is not a directory (a relative workingDir starts at the YAML's folder)",
            "point workingDir at an existing folder",
        )
        return
    for field in ("command", "args"):
        if not isinstance(container.get(field) or [], list):
            yield FieldError(
                f"{where}.{field}",
                f"must be a list, got {container[field]!r}",
                f"write one item per word, e.g. {field}: [python3, train.py]",
            )
            return
    command = container.get("command") or []
    if not command:
        yield FieldError(
            f"{where}.command",
            launch.NO_COMMAND,
            "add a command (and args), e.g. command: [python3, train.py]",
        )
        return
    name = str(command[0])
    if "$(" not in name and launch.find_executable(name, _path_of(container), cwd) is None:
        yield FieldError(
            f"{where}.command[0]",
            launch.not_found_message(name),
            "install it, add its folder to PATH, or give its full path",
        )


def _path_of(container: Mapping[str, Any]) -> str:
    """The PATH the container will have: its own literal PATH, else the one it
    inherits (`launch.replica_path`)."""
    for entry in container.get("env") or []:
        if isinstance(entry, Mapping) and entry.get("name") == "PATH" and "value" in entry:
            return str(entry["value"])
    return launch.replica_path(os.environ.get("PATH", ""))


def check_jobset(jobset: Mapping[str, Any], base_dir: Path, *, mpi: bool) -> list[FieldError]:
    """A TrainJob's JobSet (as the core builds it) before it runs here: every pod's
    container needs a command that exists (the TrainJob's `spec.trainer.command`, or
    the runtime's); an MPI runtime needs `mpirun`. Paths name the TrainJob's field
    for the trainer's command, else the JobSet's."""
    errors: list[FieldError] = []
    if mpi and shutil.which("mpirun", path=launch.replica_path(os.environ.get("PATH", ""))) is None:
        errors.append(
            FieldError(
                "spec.runtimeRef",
                "an MPI runtime needs 'mpirun', which is not on PATH",
                "install Open MPI (apt-get install openmpi-bin), or run the TrainJob on Kubernetes",
            )
        )
    size = 0
    for job in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (job.get("template") or {}).get("spec") or {}
        size += int(job.get("replicas") or 1) * int(job_spec.get("completions") or 1)
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        for index, container in enumerate(pod_spec.get("containers") or []):
            if mpi and job.get("name") == "node" and _has_launcher(jobset):
                continue  # waits locally (trainjob_mpi.py): its sshd is not run
            where = f"JobSet replicatedJobs[{job.get('name')}].containers[{index}]"
            if _trainer_step(job) and container.get("name") == "node":
                where = "spec.trainer"  # the command the TrainJob gives, or would
            errors += _check_container(container, where, base_dir)
    if size > MAX_LOCAL_REPLICAS:
        errors.append(
            FieldError(
                "spec.trainer.numNodes",
                f"{size} pods in all cannot run as processes on one machine "
                f"(tfjob run starts at most {MAX_LOCAL_REPLICAS})",
                "run the TrainJob on Kubernetes, or lower numNodes",
            )
        )
    return errors


def _has_launcher(jobset: Mapping[str, Any]) -> bool:
    jobs = (jobset.get("spec") or {}).get("replicatedJobs") or []
    return any(job.get("name") == "launcher" for job in jobs)


def _trainer_step(job: Mapping[str, Any]) -> bool:
    labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return bool(labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer")


def jobset_warnings(jobset: Mapping[str, Any]) -> list[str]:
    """What a TrainJob's local run leaves out: init containers (every pod starts at
    once here, as for the v1 kinds)."""
    return [
        f"JobSet replicatedJobs[{job.get('name')}]: init containers are not run locally"
        for job in (jobset.get("spec") or {}).get("replicatedJobs") or []
        if ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
            or {}).get("initContainers")
    ]  # fmt: skip
