"""`tfjob render JOB.yaml`: print the pods and services the operator would create."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import click
import msgspec
import yaml

from tfjob.api import constants as c
from tfjob.api.types import Job
from tfjob.core.objects import desired_objects
from tfjob.core.settings import Settings
from tfjob.frameworks.registry import with_defaults
from tfjob.interfaces.job_files import read_jobs
from tfjob.interfaces.kinds_named import naming_kinds

J = TypeVar("J", bound=Job)


@naming_kinds
@click.command(name="render")
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(path_type=Path))
@click.option("--namespace", "-n", help="Namespace of the job [default: the job's, else default].")
@click.option(
    "--cluster-domain",
    default="",
    help="Cluster domain appended to TF_CONFIG host names, as CUSTOM_CLUSTER_DOMAIN "
    "does for the operator (e.g. cluster.local).",
)
@click.option(
    "--gang-scheduler-name",
    default="",
    help="As the operator's flag: also print the gang-scheduling group objects and "
    "decorate the pods for this scheduler (default-scheduler, volcano, kube-batch, or a "
    "scheduler-plugins scheduler's name).",
)
def command(
    job_file: Path, namespace: str | None, cluster_domain: str, gang_scheduler_name: str
) -> None:
    """Print the pods and services the operator would create for JOB.yaml.

    A dry run through the same decision core the operator uses: multi-document
    YAML, for each job in the file (of any kind: {kinds}) first its gang-scheduling
    group objects (with --gang-scheduler-name), then its pods, then its headless
    services, each in replica-type order (Chief, Evaluator, Master, PS, Worker, then
    index).
    Nothing is created. The job's uid is unknown until it is created, so the
    ownerReferences name the job but carry an empty uid.
    Exit status 2 on bad input.
    """
    settings = Settings(cluster_domain=cluster_domain, gang_scheduler_name=gang_scheduler_name)
    documents = [
        obj
        for job in read_jobs(job_file, require_image=True)
        for obj in desired_objects(with_defaults(_in_namespace(job, namespace)), settings)
    ]
    click.echo("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in documents), nl=False)


def _in_namespace(job: J, namespace: str | None) -> J:
    chosen = namespace or job.metadata.namespace or c.DEFAULT_NAMESPACE
    return msgspec.structs.replace(
        job, metadata=msgspec.structs.replace(job.metadata, namespace=chosen)
    )
