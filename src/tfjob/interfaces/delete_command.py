"""`tfjob delete NAME [--wait]`: delete a TFJob from the cluster."""

from __future__ import annotations

import asyncio
import sys

import click

from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    Duration,
    Target,
    cluster_options,
    on_cluster,
)
from tfjob.runtimes.kubernetes.follow import POLL_INTERVAL
from tfjob.runtimes.kubernetes.jobs_api import JobsApi, NoSuchJob


@click.command(name="delete")
@click.argument("name")
@click.option("--wait", is_flag=True, help="Return only once the TFJob is gone.")
@click.option(
    "--timeout", type=Duration(), help="With --wait: give up after this long, e.g. 90s, 5m."
)
@cluster_options
def command(name: str, wait: bool, timeout: float | None, target: Target) -> None:
    """Delete TFJob NAME; the cluster's garbage collector then removes its pods and
    services (running replicas get their grace period).

    \b
    Exit status: 0 deleted, 2 unknown job, 3 cluster unusable, 124 --timeout passed
    before it was gone, 130 Ctrl-C.
    """
    try:
        gone = on_cluster(target, lambda api: _delete(api, name, wait, timeout))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    if not gone:
        click.echo(f"tfjob: {name} is still being deleted after {timeout:g}s", err=True)
        sys.exit(EXIT_TIMEOUT)
    click.echo(f'tfjob.kubeflow.org "{name}" deleted')


async def _delete(api: JobsApi, name: str, wait: bool, limit: float | None) -> bool:
    await api.delete(name)
    if not wait:
        return True

    async def gone() -> None:
        while True:
            try:
                await api.get(name)
            except NoSuchJob:
                return
            await asyncio.sleep(POLL_INTERVAL / 4)

    try:
        await asyncio.wait_for(gone(), limit)
    except TimeoutError:
        return False
    return True
