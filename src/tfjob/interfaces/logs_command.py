"""`tfjob logs [KIND] NAME [-f]`: every replica's output, prefixed as `tfjob run`
prints it."""

from __future__ import annotations

import re
import sys

import click

from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    Duration,
    JobRef,
    Target,
    cluster_options,
    job_ref,
    on_cluster,
)
from tfjob.interfaces.cluster_client.follow import FollowOptions, JobFollower
from tfjob.interfaces.cluster_client.jobs_api import JobsApi, kind_of
from tfjob.interfaces.console import RunConsole
from tfjob.interfaces.job_files import BadInput
from tfjob.interfaces.kinds_named import naming_kinds

# type-index (worker-1), or a TrainJob's replicated Job and index (node-0,
# dataset-initializer-0; with the Job's index when it has several: node-1-0).
_REPLICA = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?-\d+")


@naming_kinds
@click.command(name="logs")
@click.argument("job", nargs=-1, required=True, metavar="[KIND] NAME")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output until the job ends.")
@click.option(
    "--replica",
    "-r",
    help="Only this replica's output, e.g. worker-1, master-0 (a TrainJob's: node-1).",
)
@click.option(
    "--since",
    type=Duration(),
    help="Only output newer than this, e.g. 30s, 5m, 1h (the whole log by default).",
)
@cluster_options
def command(
    job: tuple[str, ...], follow: bool, replica: str | None, since: float | None, target: Target
) -> None:
    """Print the output of every replica of job NAME, each line prefixed with its
    replica ([worker-1]; [worker-1/sidecar] for another container; a TrainJob's pods,
    which its JobSet's Jobs make, as [node-0], [node-1], ...).

    \b
    NAME is looked for among every kind the cluster serves ({cluster_kinds}); when jobs of
    several kinds have it, name the kind as kubectl does: pytorchjob/NAME or
    pytorchjob NAME (trainjob/NAME for a TrainJob).
    Without -f: what each replica wrote so far, one replica after another, each in
    time order. With -f: as it comes, following restarted containers and recreated
    pods, until the job ends (Ctrl-C stops following; the job keeps running).
    Exit status: 0, 2 unknown job or replica, 3 cluster unusable, 130 Ctrl-C.
    """
    ref = job_ref(job)
    if replica is not None and not _REPLICA.fullmatch(replica):
        raise BadInput(
            f"--replica {replica}: write a replica as type-index, e.g. worker-1 "
            "(a TrainJob's: node-1)"
        )
    options = FollowOptions(
        events=False,
        replica=replica,
        since_seconds=int(since) if since is not None else None,
        until_finished=follow,
    )
    with RunConsole(sys.stdout, ref.name, live_view=False) as console:
        try:
            on_cluster(target, lambda api: _logs(api, ref, options, console))
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)


async def _logs(api: JobsApi, ref: JobRef, options: FollowOptions, console: RunConsole) -> None:
    kind = kind_of(await api.find(ref.name, ref.kind))  # an unknown job is an error, not silence
    pods = await api.pods(kind, ref.name)
    replicas = sorted({kind.replica(p.get("metadata") or {}) for p in pods})
    if options.replica and replicas and options.replica not in replicas:
        raise BadInput(
            f"{ref.name} has no replica {options.replica}; its replicas: {', '.join(replicas)}"
        )
    if not replicas and not options.until_finished:
        click.echo(f"tfjob: {ref.name} has no pods (not yet, or no longer): no output", err=True)
        return
    await JobFollower(api, kind, ref.name, console, options).follow()
