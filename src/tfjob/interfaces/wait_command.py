"""`tfjob wait [KIND] NAME`: block until a job ends (or reaches a given state)."""

from __future__ import annotations

import asyncio
import sys

import click

from tfjob.api import constants as c
from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    Duration,
    JobRef,
    Target,
    cluster_options,
    job_ref,
    on_cluster,
    outcome,
)
from tfjob.interfaces.cluster_client.follow import POLL_INTERVAL, JobDeleted
from tfjob.interfaces.cluster_client.jobs_api import JobsApi, NoSuchJob, Object, kind_of
from tfjob.interfaces.cluster_client.kinds import CLUSTER_KINDS, ClusterKind
from tfjob.interfaces.kinds_named import naming_kinds
from tfjob.interfaces.outcome import EXIT_FAILED

# Every kind's name for success (Succeeded; a TrainJob's Complete): each means the
# waited-for job's own.
_SUCCESS = tuple(dict.fromkeys(k.success for k in CLUSTER_KINDS))


@naming_kinds
@click.command(name="wait")
@click.argument("job", nargs=-1, required=True, metavar="[KIND] NAME")
@click.option(
    "--for",
    "wanted",
    type=click.Choice([*_SUCCESS, c.FAILED, c.RUNNING]),
    help="Wait for this state [default: until the job finishes, either way]; "
    "Succeeded and Complete both mean success, whatever the job's kind calls it.",
)
@click.option(
    "--timeout",
    type=Duration(),
    help="Give up after this long, e.g. 90s, 5m, 1h [default: no limit].",
)
@cluster_options
def command(
    job: tuple[str, ...], wanted: str | None, timeout: float | None, target: Target
) -> None:
    """Wait for job NAME to finish, or to reach the state given with --for.

    \b
    NAME is looked for among every kind the cluster serves ({cluster_kinds}); when jobs of
    several kinds have it, name the kind: pytorchjob/NAME or pytorchjob NAME
    (trainjob/NAME for a TrainJob).
    Exit status: 0 the job Succeeded (a TrainJob: Complete) or reached the --for state,
    1 it Failed (or finished without reaching the --for state, or was deleted; the
    reason on stderr), 2 unknown job, 3 cluster unusable, 124 --timeout passed,
    130 Ctrl-C.
    """
    ref = job_ref(job)
    try:
        found = on_cluster(target, lambda api: _wait(api, ref, wanted, timeout))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    if found is None:
        click.echo(f"tfjob: {ref.name} is not {wanted or 'finished'} after {timeout:g}s", err=True)
        sys.exit(EXIT_TIMEOUT)
    sys.exit(_status(found, wanted))


async def _wait(
    api: JobsApi, ref: JobRef, wanted: str | None, limit: float | None
) -> Object | None:
    """The job once it reached the wanted state or finished; None on timeout."""

    async def poll() -> Object:
        job = await api.find(ref.name, ref.kind)  # an unknown job is an error
        kind = kind_of(job)
        while not (kind.finished(job) or (wanted and _reached(kind, job, wanted))):
            await asyncio.sleep(POLL_INTERVAL)
            try:
                job = await api.get(kind, ref.name)
            except NoSuchJob:  # it existed: deleted while waited for
                raise JobDeleted(ref.name) from None
        return job

    try:
        return await asyncio.wait_for(poll(), limit)
    except TimeoutError:
        return None


def _reached(kind: ClusterKind, job: Object, wanted: str) -> bool:
    return kind.reached(job, kind.success if wanted in _SUCCESS else wanted)


def _status(job: Object, wanted: str | None) -> int:
    if wanted is None or wanted in _SUCCESS:
        return outcome(job)
    kind = kind_of(job)
    if _reached(kind, job, wanted):
        return 0
    name = job["metadata"]["name"]
    click.echo(f"tfjob: {name} finished ({kind.state(job)}) without being {wanted}", err=True)
    return EXIT_FAILED
