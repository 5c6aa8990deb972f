"""`tfjob delete [KIND] NAME [--wait]`: delete a job from the cluster."""

from __future__ import annotations

import asyncio
import sys

import click

from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    Duration,
    JobRef,
    Target,
    cluster_options,
    job_ref,
    on_cluster,
)
from tfjob.interfaces.cluster_client.follow import POLL_INTERVAL
from tfjob.interfaces.cluster_client.jobs_api import JobsApi, NoSuchJob, kind_of, resource_name
from tfjob.interfaces.kinds_named import naming_kinds


@naming_kinds
@click.command(name="delete")
@click.argument("job", nargs=-1, required=True, metavar="[KIND] NAME")
@click.option("--wait", is_flag=True, help="Return only once the job is gone.")
@click.option(
    "--timeout", type=Duration(), help="With --wait: give up after this long, e.g. 90s, 5m."
)
@cluster_options
def command(job: tuple[str, ...], wait: bool, timeout: float | None, target: Target) -> None:
    """Delete job NAME; the cluster's garbage collector then removes its pods and
    services (a TrainJob's JobSet, its Jobs and their pods; running replicas get their
    grace period).

    \b
    NAME is looked for among every kind the cluster serves ({cluster_kinds}); when jobs of
    several kinds have it, name the kind: pytorchjob/NAME or pytorchjob NAME
    (trainjob/NAME for a TrainJob).
    Exit status: 0 deleted, 2 unknown job, 3 cluster unusable, 124 --timeout passed
    before it was gone, 130 Ctrl-C.
    """
    ref = job_ref(job)
    try:
        deleted, gone = on_cluster(target, lambda api: _delete(api, ref, wait, timeout))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    if not gone:
        click.echo(f"tfjob: {ref.name} is still being deleted after {timeout:g}s", err=True)
        sys.exit(EXIT_TIMEOUT)
    click.echo(f'{deleted} "{ref.name}" deleted')


async def _delete(api: JobsApi, ref: JobRef, wait: bool, limit: float | None) -> tuple[str, bool]:
    """The deleted job's type as kubectl names it, and whether it is gone."""
    kind = kind_of(await api.find(ref.name, ref.kind))
    await api.delete(kind, ref.name)
    if not wait:
        return resource_name(kind), True

    async def gone() -> None:
        while True:
            try:
                await api.get(kind, ref.name)
            except NoSuchJob:
                return
            await asyncio.sleep(POLL_INTERVAL / 4)

    try:
        await asyncio.wait_for(gone(), limit)
    except TimeoutError:
        return resource_name(kind), False
    return resource_name(kind), True
