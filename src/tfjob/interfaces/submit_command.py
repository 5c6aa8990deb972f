"""`tfjob submit JOB.yaml [--follow]`: create jobs of any kind on the cluster, and
follow one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    Target,
    cluster_options,
    on_cluster,
    outcome,
)
from tfjob.interfaces.cluster_client.follow import JobFollower
from tfjob.interfaces.cluster_client.jobs_api import JobsApi, Object, kind_of, resource_name
from tfjob.interfaces.console import RunConsole
from tfjob.interfaces.job_files import BadInput, read_cluster_jobs
from tfjob.interfaces.kinds_named import naming_kinds
from tfjob.runtimes.kubernetes.transport.client import ApiError


@naming_kinds
@click.command(name="submit")
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(path_type=Path))
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Then show the job's live status and every replica's output until it ends.",
)
@click.option("--no-view", is_flag=True, help="With --follow: no live status table.")
@cluster_options
def command(job_file: Path, follow: bool, no_view: bool, target: Target) -> None:
    """Create the job(s) in JOB.yaml on the cluster of the current kubeconfig context:
    any kind tfjob serves ({cluster_kinds}).

    \b
    The file is checked with the same rules as `tfjob run` (and images are required;
    a TrainJob by its CRD's schema and rules, its image may come from its runtime)
    before anything is sent; the job is then created as written: an ordinary object
    of its kind that kubectl and Kubeflow's SDKs see unchanged.

    \b
    With --follow (one job per file): the live status table on a terminal, every
    replica's output prefixed with its name ([worker-1]) as `tfjob run` shows it,
    following restarts and recreated pods, and the job's events, until the job ends.
    Ctrl-C stops following; the job keeps running on the cluster.

    \b
    Exit status: 0 created (with --follow: Succeeded), 1 Failed, 2 bad input or
    refused by the cluster (nothing created), 3 cluster unusable, 130 Ctrl-C.
    Example: tfjob submit job.yaml --follow
    """
    documents = read_cluster_jobs(job_file, require_image=True)
    if follow and len(documents) > 1:
        names = ", ".join(_name(d) for d in documents)
        raise BadInput(
            f"{job_file} holds {len(documents)} jobs ({names}); --follow follows one job: "
            "submit the others without --follow, or put each in its own file"
        )
    namespace = _namespace(documents, target)
    if not follow:
        for created in on_cluster(target, lambda api: _create_all(api, documents), namespace):
            click.echo(f"{created} created")
        return
    kind, name = str(documents[0]["kind"]), _name(documents[0])
    named = f"{kind.lower()}/{name}"  # unambiguous whatever else has the name
    with RunConsole(sys.stdout, f"{kind} {name}", live_view=not no_view) as console:
        try:
            final = on_cluster(
                target, lambda api: _create_and_follow(api, documents[0], console), namespace
            )
        except KeyboardInterrupt:
            final = None
    if final is None:
        click.echo(
            f"tfjob: stopped following {name}; it keeps running on the cluster "
            f"(tfjob logs {named} -f to follow again, tfjob delete {named} to stop it)",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(outcome(final))


def _name(document: dict[str, Any]) -> str:
    return str((document.get("metadata") or {}).get("name", ""))


def _namespace(documents: list[dict[str, Any]], target: Target) -> str | None:
    """The job's own namespace unless -n names another (refused, as kubectl does)."""
    written = {
        str(namespace)
        for d in documents
        if (namespace := (d.get("metadata") or {}).get("namespace"))
    }
    if target.namespace and written - {target.namespace}:
        raise BadInput(
            f"the file's namespace ({', '.join(sorted(written))}) does not match "
            f"--namespace {target.namespace}: drop one of them"
        )
    if len(written) > 1:
        raise BadInput(f"the file's jobs name several namespaces ({', '.join(sorted(written))})")
    return next(iter(written), None)


async def _create(api: JobsApi, document: dict[str, Any]) -> Object:
    name = (document.get("metadata") or {}).get("name", "")
    try:
        return await api.create(document)
    except ApiError as error:
        if error.code in (400, 409, 422):
            kind = str(document.get("kind", "")).lower()
            hint = f" (tfjob delete {kind}/{name} first)" if error.already_exists else ""
            raise BadInput(f"the cluster refused {name}: {error.message}{hint}") from None
        raise


async def _create_all(api: JobsApi, documents: list[dict[str, Any]]) -> list[str]:
    created = [await _create(api, document) for document in documents]
    return [f"{resource_name(kind_of(job))}/{job['metadata']['name']}" for job in created]


async def _create_and_follow(api: JobsApi, document: dict[str, Any], console: RunConsole) -> Object:
    created = await _create(api, document)
    name = str(created["metadata"]["name"])
    console.note(
        f"created {created['kind']} {name} in namespace {api.namespace}; "
        "Ctrl-C stops following, not the job"
    )
    return await JobFollower(api, kind_of(created), name, console).follow()
