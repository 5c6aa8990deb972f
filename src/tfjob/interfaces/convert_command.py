"""`tfjob convert JOB.yaml`: print each v1 job of the file as a Trainer v2 TrainJob."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from tfjob.core.convert import Conversion, convert
from tfjob.interfaces.job_files import read_jobs
from tfjob.interfaces.kinds_named import naming_kinds

#: Exit status with --strict when a job says something its TrainJob does not.
EXIT_LOSSY = 1


@naming_kinds
@click.command(name="convert")
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(path_type=Path))
@click.option(
    "--strict",
    is_flag=True,
    help="Exit with status 1 when any field has no TrainJob form (the YAML is printed "
    "all the same).",
)
def command(job_file: Path, strict: bool) -> None:
    """Print each job in JOB.yaml ({kinds}) as a Kubeflow Trainer v2 TrainJob.

    A PyTorchJob, JAXJob or XGBoostJob runs on Trainer's torch-distributed,
    jax-distributed or xgboost-distributed runtime when its template fits a TrainJob;
    any other job gets a TrainingRuntime of its own, printed before the TrainJob, that
    carries its replica templates (an MPIJob's with mlPolicy.mpi: the launcher's
    mpirun reaches the Workers over ssh, with the runtime's hostfile). Multi-document
    YAML on standard output, ready for `kubectl apply --server-side -f -`.

    Every field that has no TrainJob form is named on standard error, with its JSON
    path (a restartPolicy ExitCode, cleanPodPolicy, ttlSecondsAfterFinished, env the
    operator gives each pod differently, ...). Exit status 0, or 1 with --strict when
    anything is lost; 2 on bad input. Nothing is sent to a cluster.
    """
    conversions = [convert(job) for job in read_jobs(job_file, require_image=True)]
    documents = [d for c in conversions for d in c.documents]
    click.echo("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in documents), nl=False)
    for conversion in conversions:
        _report(job_file, conversion)
    if strict and any(c.losses for c in conversions):
        sys.exit(EXIT_LOSSY)


def _report(job_file: Path, conversion: Conversion) -> None:
    name = conversion.trainjob["metadata"]["name"]
    for loss in conversion.losses:
        click.echo(f"tfjob convert: {job_file}: {name}: lost {loss}", err=True)
