"""`tfjob run JOB.yaml`: run a job of any kind on this machine, one process per replica."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeVar

import click
import msgspec
import yaml

from tfjob.api import trainjob as tj
from tfjob.api.training_runtime import TrainingRuntime
from tfjob.api.trainjob import TrainJob, encode
from tfjob.api.types import Job, to_dict
from tfjob.core.trainjob.jobset import build
from tfjob.interfaces.console import RunConsole
from tfjob.interfaces.job_files import (
    BadInput,
    holds_trainjob,
    invalid,
    read_jobs,
    read_runtimes,
    read_trainer_file,
)
from tfjob.interfaces.kinds_named import naming_kinds
from tfjob.interfaces.outcome import EXIT_FAILED, EXIT_SUCCEEDED, exit_status
from tfjob.runtimes.local import preflight
from tfjob.runtimes.local.run import LocalRun, RunOptions
from tfjob.runtimes.local.runtime_lookup import find_runtime, shipped_runtimes
from tfjob.runtimes.local.trainjob_run import LocalTrainJobRun, admitted_trainjob

# A run stopped by a signal exits as a shell reports a process killed by it: 128 + N.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@naming_kinds
@click.command(name="run")
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(path_type=Path))
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the replicas' log files and the final job.yaml "
    "[default: .tfjob/runs/<job>-<YYYYmmdd-HHMMSS>].",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["yaml", "json"]),
    help="At the end, print the job with its final status to stdout "
    "(replica output and events then go to stderr).",
)
@click.option(
    "--grace-period",
    type=click.FloatRange(min=0),
    help="Seconds a replica has to exit after SIGTERM before SIGKILL "
    "[default: the pod's terminationGracePeriodSeconds, else 5].",
)
@click.option(
    "--namespace", "-n", help="Namespace to run the job in [default: the job's, else default]."
)
@click.option("--no-view", is_flag=True, help="Do not show the live status table on a terminal.")
@click.option(
    "--runtime",
    "runtime_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TrainJob's TrainingRuntime or ClusterTrainingRuntime, from this file "
    "[default: the TrainJob's file, else the ClusterTrainingRuntimes Trainer ships].",
)
def command(
    job_file: Path,
    run_dir: Path | None,
    output: str | None,
    grace_period: float | None,
    namespace: str | None,
    no_view: bool,
    runtime_file: Path | None,
) -> None:
    """Run the job in JOB.yaml ({kinds}) on this machine, one process (group)
    per replica.

    \b
    Each replica runs its containers' `command` + `args` directly (no shell; `image`
    is ignored), from `workingDir`, which is taken relative to JOB.yaml's folder
    (without workingDir: the current folder). Executables are looked up on PATH.
    Every replica gets its kind's env with 127.0.0.1 addresses, one free port each
    (a TFJob's TF_CONFIG; a PyTorchJob's MASTER_ADDR/MASTER_PORT, the Master's, RANK,
    WORLD_SIZE and PET_*, the rendezvous endpoint at Worker 0's port; a JAXJob's
    coordinator at Worker 0's port, an XGBoostJob's MASTER_ADDR/MASTER_PORT, a
    PaddleJob's PADDLE_MASTER), and
    TFJOB_PORT (its own port), TFJOB_REPLICA_TYPE, TFJOB_REPLICA_INDEX, TFJOB_POD_NAME
    and PYTHONUNBUFFERED=1. Init containers (a PyTorchJob's init-pytorch) are not
    run: every replica starts at once. `$(VAR)` in command, args and env values is expanded, and
    env `valueFrom.fieldRef` supports metadata.name/namespace/uid, metadata.labels['k'],
    metadata.annotations['k'], status.podIP and status.hostIP.

    \b
    restartPolicy works as on Kubernetes: OnFailure/Always restart a container in
    place, ExitCode and failed pods are handled by the same decision core as the
    operator. Output is shown live, each line prefixed with its replica ([worker-1]),
    and kept in RUN_DIR/<pod>.log (appended across restarts).

    \b
    The run ends when the job succeeds or fails. cleanPodPolicy is applied first,
    but locally nothing outlives the run: replicas still running at the end (e.g. PS
    under cleanPodPolicy: None) are then stopped (SIGTERM, grace period, SIGKILL), as
    they are on Ctrl-C or SIGTERM. If tfjob itself is killed, its replicas and their
    children are killed too.

    \b
    A second Ctrl-C skips the grace period.

    \b
    A TrainJob (trainer.kubeflow.org/v1alpha1) runs with the runtime it names: one
    in its file, in --runtime FILE, or one Kubeflow Trainer ships (torch-distributed,
    jax-distributed, xgboost-distributed, deepspeed-distributed, mlx-distributed) or
    tfjob adds (tensorflow-distributed, paddle-distributed).
    Each pod of its JobSet is a process with the env a cluster gives it, host names
    mapped to 127.0.0.1 and a port each; RUN_DIR/trainjob.yaml and jobset.yaml hold
    the end state. Exit status 0 Complete, 1 Failed.

    \b
    A file holding several jobs is rejected: run one job per file.
    Exit status: 0 Succeeded, 1 Failed, 2 bad input (nothing started),
    130 Ctrl-C (SIGINT), 143 SIGTERM, 129 SIGHUP.
    Example: tfjob run examples/ping/job.yaml
    """
    if holds_trainjob(job_file):
        given = RunOptions(job_file.resolve().parent, run_dir or Path(), grace_period, namespace)
        _run_trainjob_file(job_file, runtime_file, given, output, no_view, run_dir is None)
    if runtime_file is not None:
        raise BadInput("--runtime is for a TrainJob; this file holds no TrainJob")
    job = _one_job(job_file)
    base_dir = job_file.resolve().parent
    errors, warnings = preflight.check(job, base_dir)
    if errors:
        raise invalid(str(job_file), errors, job.kind)
    stream = sys.stderr if output else sys.stdout
    options = RunOptions(
        base_dir=base_dir,
        run_dir=run_dir or _default_run_dir(job.metadata.name),
        grace_period=grace_period,
        namespace=namespace,
    )
    with RunConsole(stream, f"{job.kind} {job.metadata.name}", live_view=not no_view) as console:
        for warning in warnings:
            console.note(warning, warning=True)
        console.note(f"logs in {options.run_dir}/")
        final, stopped_by = asyncio.run(_run(LocalRun(job, options, console), console))
    if output:
        click.echo(_render(final, output))
    sys.exit(_exit_status(final, stopped_by))


def _one_job(job_file: Path) -> Job:
    jobs = read_jobs(job_file, require_image=False)
    if len(jobs) > 1:
        names = ", ".join(j.metadata.name for j in jobs)
        raise BadInput(
            f"{job_file} holds {len(jobs)} jobs ({names}); tfjob run runs one job: "
            "put each in its own file and run them separately"
        )
    return jobs[0]


class _Run(Protocol[T_co]):
    """A local run (of a v1 job, or of a TrainJob) that a signal can stop."""

    async def run(self) -> T_co: ...

    def stop(self) -> None: ...


async def _run(run: _Run[T], console: RunConsole) -> tuple[T, int | None]:
    """Run to the end; also returns the signal that stopped the run, if one did."""
    stopped_by: list[int] = []

    def stop(signum: int) -> None:
        stopped_by.append(signum)
        console.note(f"{signal.Signals(signum).name}: stopping every replica")
        run.stop()

    loop = asyncio.get_running_loop()
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        final = await run.run()
    finally:
        for signum in _STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    return final, (stopped_by[0] if stopped_by else None)


def _exit_status(job: Job, stopped_by: int | None) -> int:
    if stopped_by is not None:
        return 128 + stopped_by
    return exit_status(job.metadata.name, job.status.conditions)


def _default_run_dir(job_name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(".tfjob") / "runs" / f"{job_name}-{stamp}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _render(job: Job, output: str) -> str:
    if output == "json":
        return msgspec.json.format(msgspec.json.encode(job), indent=2).decode()
    return yaml.safe_dump(to_dict(job), sort_keys=False).rstrip("\n")


# -- a TrainJob -----------------------------------------------------------------------


def _run_trainjob_file(
    job_file: Path,
    runtime_file: Path | None,
    options: RunOptions,
    output: str | None,
    no_view: bool,
    default_run_dir: bool,
) -> None:
    """Check the TrainJob and its runtimes as `kubectl apply` would, then its JobSet as
    this machine needs it, then run it; exits with its outcome."""
    found = read_trainer_file(job_file, require_image=False)
    if len(found.trainjobs) != 1:
        raise BadInput(
            f"{job_file} holds {len(found.trainjobs)} TrainJobs; tfjob run runs one TrainJob"
            " (with its runtimes beside it, if any)"
        )
    given = found.runtimes + ([] if runtime_file is None else read_runtimes(runtime_file))
    trainjob = admitted_trainjob(found.trainjobs[0], options.namespace)
    runtime = find_runtime(trainjob, given)
    warnings = _preflight(job_file, trainjob, runtime, options.base_dir)
    name = trainjob.metadata.name
    if default_run_dir:
        options = dataclasses.replace(options, run_dir=_default_run_dir(name))
    stream = sys.stderr if output else sys.stdout
    with RunConsole(stream, f"TrainJob {name}", live_view=not no_view) as console:
        if runtime is None:
            console.note(_no_runtime(trainjob), warning=True)
        for warning in warnings:
            console.note(warning, warning=True)
        console.note(f"logs in {options.run_dir}/")
        run = LocalTrainJobRun(trainjob, runtime, options, console)
        final, stopped_by = asyncio.run(_run(run, console))
    if output:
        document = {"apiVersion": final.api_version, "kind": final.kind, **encode(final)}
        click.echo(_dump(document, output))
    if stopped_by is not None:
        sys.exit(128 + stopped_by)
    sys.exit(_trainjob_status(name, final))


def _preflight(
    job_file: Path, trainjob: TrainJob, runtime: TrainingRuntime | None, base_dir: Path
) -> list[str]:
    """What this machine needs of the JobSet the core would make (nothing when the
    runtime is missing or cannot be built: the core then fails the TrainJob, as the
    controller does on a cluster); returns what the run leaves out."""
    if runtime is None:
        return []
    try:
        built = build(trainjob, runtime, secret_exists=True, key_pair=None)
    except ValueError:
        return []
    policy = runtime.spec.ml_policy
    mpi = policy is not None and policy.mpi is not None
    errors = preflight.check_jobset(built.jobset, base_dir, mpi=mpi)
    if errors:
        raise invalid(str(job_file), errors, "TrainJob")
    return preflight.jobset_warnings(built.jobset)


def _no_runtime(trainjob: TrainJob) -> str:
    ref = trainjob.spec.runtime_ref
    shipped = ", ".join(shipped_runtimes())
    return (
        f"no {ref.kind_or_default} {ref.name!r} in the file or --runtime FILE"
        f" (shipped ClusterTrainingRuntimes: {shipped})"
    )


def _trainjob_status(name: str, trainjob: TrainJob) -> int:
    """0 Complete; 1 Failed (its message on stderr) or ended without completing."""
    failed = trainjob.status.condition(tj.FAILED)
    if failed is not None and failed.status == "True":
        click.echo(f"tfjob: {name} failed: {failed.message}", err=True)
        return EXIT_FAILED
    if not trainjob.status.is_true(tj.COMPLETE):
        click.echo(f"tfjob: {name} ended without completing", err=True)
        return EXIT_FAILED
    return EXIT_SUCCEEDED


def _dump(document: dict[str, object], output: str) -> str:
    if output == "json":
        return msgspec.json.format(msgspec.json.encode(document), indent=2).decode()
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")
