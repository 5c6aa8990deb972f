"""`tfjob wait NAME`: block until a TFJob ends (or reaches a given state)."""

from __future__ import annotations

import asyncio
import sys

import click

from tfjob.api import constants as c
from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    Duration,
    Target,
    cluster_options,
    on_cluster,
    outcome,
)
from tfjob.interfaces.outcome import EXIT_FAILED
from tfjob.runtimes.kubernetes.follow import (
    POLL_INTERVAL,
    JobDeleted,
    is_finished,
    state,
    true_condition,
)
from tfjob.runtimes.kubernetes.jobs_api import JobsApi, NoSuchJob, Object


@click.command(name="wait")
@click.argument("name")
@click.option(
    "--for",
    "wanted",
    type=click.Choice([c.SUCCEEDED, c.FAILED, c.RUNNING]),
    help="Wait for this state [default: until the job finishes, either way].",
)
@click.option(
    "--timeout",
    type=Duration(),
    help="Give up after this long, e.g. 90s, 5m, 1h [default: no limit].",
)
@cluster_options
def command(name: str, wanted: str | None, timeout: float | None, target: Target) -> None:
    """Wait for TFJob NAME to finish, or to reach the state given with --for.

    \b
    Exit status: 0 the job Succeeded (or reached the --for state), 1 it Failed (or
    finished without reaching the --for state, or was deleted; the reason on stderr),
    2 unknown job, 3 cluster unusable, 124 --timeout passed, 130 Ctrl-C.
    """
    try:
        job = on_cluster(target, lambda api: _wait(api, name, wanted, timeout))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    if job is None:
        click.echo(f"tfjob: {name} is not {wanted or 'finished'} after {timeout:g}s", err=True)
        sys.exit(EXIT_TIMEOUT)
    sys.exit(_status(job, wanted))


async def _wait(api: JobsApi, name: str, wanted: str | None, limit: float | None) -> Object | None:
    """The job once it reached the wanted state or finished; None on timeout."""

    async def poll() -> Object:
        seen = False
        while True:
            try:
                job = await api.get(name)
            except NoSuchJob:
                if seen:  # it existed: deleted while waited for
                    raise JobDeleted(name) from None
                raise
            seen = True
            if is_finished(job) or (wanted and true_condition(job, wanted)):
                return job
            await asyncio.sleep(POLL_INTERVAL)

    try:
        return await asyncio.wait_for(poll(), limit)
    except TimeoutError:
        return None


def _status(job: Object, wanted: str | None) -> int:
    if wanted is None or wanted == c.SUCCEEDED:
        return outcome(job)
    if true_condition(job, wanted):
        return 0
    name = job["metadata"]["name"]
    click.echo(f"tfjob: {name} finished ({state(job)}) without being {wanted}", err=True)
    return EXIT_FAILED
