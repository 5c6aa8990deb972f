"""`tfjob render JOB.yaml`: print the pods and services the operator would create."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec
import yaml

from tfjob.api import constants as c
from tfjob.api import trainjob as tj
from tfjob.api.types import Job
from tfjob.core.objects import desired_objects
from tfjob.core.settings import Settings
from tfjob.core.trainjob.plan import ApplyObject, CreateObject, Observed
from tfjob.core.trainjob.reconcile import reconcile_trainjob
from tfjob.frameworks.registry import with_defaults
from tfjob.interfaces.job_files import (
    BadInput,
    holds_trainjob,
    read_jobs,
    read_runtimes,
    read_trainer_file,
)
from tfjob.interfaces.kinds_named import naming_kinds
from tfjob.runtimes.local.runtime_lookup import find_runtime
from tfjob.runtimes.mpi_keys import new_key_pair

J = TypeVar("J", bound=Job)
#: A TrainJob's objects do not depend on the time of the pass that makes them.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
@click.option(
    "--runtime",
    "runtime_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TrainJob's TrainingRuntime or ClusterTrainingRuntime, from this file "
    "[default: the TrainJob's file, else the ClusterTrainingRuntimes Trainer ships].",
)
def command(
    job_file: Path,
    namespace: str | None,
    cluster_domain: str,
    gang_scheduler_name: str,
    runtime_file: Path | None,
) -> None:
    """Print the pods and services the operator would create for JOB.yaml.

    A dry run through the same decision core the operator uses: multi-document
    YAML, for each job in the file (of any kind: {kinds}) first its gang-scheduling
    group objects (with --gang-scheduler-name), then its pods, then its headless
    services, each in replica-type order (Chief, Evaluator, Master, PS, Worker, then
    index).
    Nothing is created. The job's uid is unknown until it is created, so the
    ownerReferences name the job but carry an empty uid.
    A TrainJob file (trainer.kubeflow.org/v1alpha1) prints, for each TrainJob, what
    the TrainJob controller applies: the runtime snapshot ConfigMap, the runtime's
    side objects (an MPI runtime's ssh Secret, with a freshly made key, and hostfile
    ConfigMap; a PodGroup), then the JobSet. The runtime is one in the file, in
    --runtime FILE, or one Kubeflow Trainer ships.
    Exit status 2 on bad input.
    """
    if holds_trainjob(job_file):
        documents = _trainjob_objects(job_file, runtime_file, namespace)
        click.echo("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in documents), nl=False)
        return
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


def _trainjob_objects(
    job_file: Path, runtime_file: Path | None, namespace: str | None
) -> list[dict[str, Any]]:
    """Each TrainJob's objects, in the order the controller applies them."""
    found = read_trainer_file(job_file, require_image=True)
    given = found.runtimes + ([] if runtime_file is None else read_runtimes(runtime_file))
    documents: list[dict[str, Any]] = []
    for trainjob in found.trainjobs:
        chosen = namespace or trainjob.metadata.namespace or c.DEFAULT_NAMESPACE
        trainjob = msgspec.structs.replace(
            trainjob, metadata=msgspec.structs.replace(trainjob.metadata, namespace=chosen)
        )
        runtime = find_runtime(trainjob, given)
        plan = reconcile_trainjob(trainjob, runtime, Observed(), _EPOCH)
        if plan.needs_key_pair:
            plan = reconcile_trainjob(trainjob, runtime, Observed(), _EPOCH, new_key_pair())
        failed = plan.status.condition(tj.FAILED)
        if failed is not None:
            raise BadInput(f"{job_file}: TrainJob {trainjob.metadata.name}: {failed.message}")
        documents += [
            action.manifest
            for action in plan.actions
            if isinstance(action, ApplyObject | CreateObject)
        ]
    return documents
