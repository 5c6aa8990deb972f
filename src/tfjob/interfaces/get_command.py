"""`tfjob get [KIND] [NAME] [-w] [-o wide|yaml|json]`: jobs of every kind on the
cluster, as a person reads them (kind, state, replicas, restarts, age) or as the API
holds them."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
import msgspec
import yaml

from tfjob.interfaces.cluster import (
    EXIT_INTERRUPTED,
    JobRef,
    Target,
    age,
    cluster_options,
    job_ref,
    on_cluster,
    parse_kind,
)
from tfjob.interfaces.cluster_client.follow import POLL_INTERVAL, replica_view
from tfjob.interfaces.cluster_client.jobs_api import (
    JobsApi,
    Object,
    event_time,
    kind_named,
    kind_of,
)
from tfjob.interfaces.cluster_client.kinds import ClusterKind
from tfjob.interfaces.kinds_named import naming_kinds

_COLUMNS = ("NAME", "KIND", "STATE", "READY", "SUCCEEDED", "FAILED", "RESTARTS", "AGE")
_AGE = _COLUMNS.index("AGE")
_WIDE = ("REPLICAS", "REASON")
RECENT_EVENTS = 10


@dataclass(frozen=True)
class _Look:
    """One read of the namespace (or of one job): the jobs and their pods."""

    jobs: list[Object]
    pods: list[Object]


@dataclass(frozen=True)
class _Asked:
    """What to show: one job (`job`), or every job, of one kind (`kind`) or of all."""

    job: JobRef | None = None
    kind: ClusterKind | None = None

    @property
    def name(self) -> str | None:
        return self.job.name if self.job else None


@naming_kinds
@click.command(name="get")
@click.argument("words", nargs=-1, metavar="[KIND] [NAME]")
@click.option("--watch", "-w", is_flag=True, help="After the first listing, print each change.")
@click.option("--output", "-o", type=click.Choice(["wide", "yaml", "json"]), help="Output format.")
@cluster_options
def command(words: tuple[str, ...], watch: bool, output: str | None, target: Target) -> None:
    """Show the jobs in the namespace, of every kind the cluster serves ({cluster_kinds}),
    or one job.

    \b
    tfjob get                    every job: TFJobs, PyTorchJobs, ..., TrainJobs
    tfjob get pytorchjobs        one kind's (KIND as kubectl takes it: pytorchjob,
                                 pytorchjobs, PyTorchJob, pytorchjobs.kubeflow.org;
                                 trainjobs for Kubeflow Trainer's TrainJobs)
    tfjob get NAME               one job, whatever its kind
    tfjob get pytorchjob NAME    (or pytorchjob/NAME) when several kinds have NAME

    \b
    A listing has one line per job - kind, state, pods ready (of the replicas asked
    for), replicas succeeded and failed, restarts, age (-o wide: the replica types and
    the latest condition's reason); kinds whose CRD is not installed are left out.
    A TrainJob's pods are its JobSet's; its state is its latest condition that holds
    (Complete, Failed, Suspended), else Running once a Job of it is active.
    One job: the job, the table of its replicas that `tfjob run` shows, and its recent
    events. -o yaml|json prints the object(s) as kubectl does. -w prints a line (or
    object) again whenever it changes; Ctrl-C ends it.

    \b
    Exit status: 0, 2 unknown job or kind, 3 cluster unusable (or the kind asked for
    not installed), 130 Ctrl-C during -w.
    """
    asked = _asked(words)
    try:
        on_cluster(target, lambda api: _show(api, asked, watch, output))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


def _asked(words: tuple[str, ...]) -> _Asked:
    """A lone word is a kind when it names one (`tfjob get pytorchjobs`), else a job's
    name; `pytorchjob/NAME` and `pytorchjob NAME` name both."""
    if not words:
        return _Asked()
    if len(words) == 1 and "/" not in words[0] and kind_named(words[0]) is not None:
        return _Asked(kind=parse_kind(words[0]))
    return _Asked(job=job_ref(words))


async def _show(api: JobsApi, asked: _Asked, watch: bool, output: str | None) -> None:
    look = await _look(api, asked)
    if asked.job is not None:  # -w looks again at the job found, not for the name anew
        asked = _Asked(job=JobRef(asked.job.name, kind_of(look.jobs[0])))
    if watch:
        await _watch(api, asked, output, look)
    elif asked.job and output is None:
        click.echo(await _describe(api, look))
    elif output in ("yaml", "json"):
        click.echo(_objects(look.jobs, asked.name, output))
    elif look.jobs:
        click.echo(_layout(_rows(look, wide=output == "wide")))
    else:
        kinds = f"{asked.kind.kind}s" if asked.kind else "jobs"
        click.echo(f"No {kinds} in namespace {api.namespace}.", err=True)


async def _watch(api: JobsApi, asked: _Asked, output: str | None, look: _Look) -> None:
    """As kubectl -w: every job once (a table, or one object each), then each change."""
    as_objects = output in ("yaml", "json")
    rows = _rows(look, wide=output == "wide")
    widths = _widths(rows)
    shown: dict[str, tuple[str, ...]] = {}
    if not as_objects:
        click.echo(_layout(rows, widths))
        shown = {_key(j): _change(j, look.pods, output) for j in look.jobs}
    printed = 0
    while True:
        for job in look.jobs:
            change = _change(job, look.pods, output)
            if shown.get(_key(job)) == change:
                continue
            shown[_key(job)] = change
            if not as_objects:
                click.echo(_layout([_row(job, look.pods, output == "wide")], widths))
                continue
            separator = "---\n" if output == "yaml" and printed else ""  # one YAML stream
            click.echo(separator + _objects([job], job["metadata"]["name"], str(output)))
            printed += 1
        await asyncio.sleep(POLL_INTERVAL)
        look = await _look(api, asked)


async def _look(api: JobsApi, asked: _Asked) -> _Look:
    if asked.job is None:
        return _Look(await api.list_jobs(asked.kind), await api.pods())
    job = await api.find(asked.job.name, asked.job.kind)
    return _Look([job], await api.pods(kind_of(job), asked.job.name))


def _change(job: Object, pods: list[Object], output: str | None) -> tuple[str, ...]:
    """What -w reports a change of: a new version of the object for yaml/json, else a
    change of the job's line (its age aside, which changes by itself)."""
    if output in ("yaml", "json"):
        return (str(job["metadata"].get("resourceVersion", "")),)
    row = _row(job, pods, wide=True)
    return (*row[:_AGE], *row[_AGE + 1 :])


def _key(job: Object) -> str:
    return str(job["metadata"].get("uid", ""))


# -- one line per job ------------------------------------------------------------------


def _rows(look: _Look, *, wide: bool) -> list[tuple[str, ...]]:
    head = _COLUMNS + _WIDE if wide else _COLUMNS
    return [head, *(_row(job, look.pods, wide) for job in look.jobs)]


def _row(job: Object, pods: list[Object], wide: bool) -> tuple[str, ...]:
    metadata = job["metadata"]
    kind = kind_of(job)
    asked = kind.replicas_asked(job)
    mine = [p for p in pods if kind.owns(p, job)]
    ready = sum(1 for p in mine if _ready(p))
    succeeded, failed = kind.counts(job, mine)
    restarts = kind.restarts_recorded(job) + sum(replica_view(p, kind).restarts for p in mine)
    row = (
        str(metadata["name"]),
        str(job["kind"]),
        kind.state(job) or "Created",
        f"{ready}/{sum(asked.values())}" if asked else f"{ready}/?",
        str(succeeded),
        str(failed),
        str(restarts),
        age(metadata.get("creationTimestamp"), datetime.now(UTC)),
    )
    if not wide:
        return row
    types = ",".join(f"{t}:{count}" for t, count in asked.items())
    latest = _latest(job)
    return (*row, types or "-", str(latest.get("reason", "")) if latest else "-")


def _latest(job: Object) -> Object:
    """The latest condition that holds, else the latest ({} before the first): a
    TrainJob's `Suspended=False` after its `Complete=True` is not its news."""
    conditions = (job.get("status") or {}).get("conditions") or []
    holding = [k for k in conditions if k.get("status") == "True"]
    return dict((holding or conditions or [{}])[-1])


def _ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(k.get("type") == "Ready" and k.get("status") == "True" for k in conditions)


def _widths(rows: list[tuple[str, ...]]) -> list[int]:
    return [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]


def _layout(rows: list[tuple[str, ...]], widths: list[int] | None = None) -> str:
    """Columns padded as kubectl pads them: three spaces after the widest cell (later
    lines of -w keep the first listing's widths, as kubectl's do)."""
    widths = widths or _widths(rows)
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    )


# -- one job in full -------------------------------------------------------------------


async def _describe(api: JobsApi, look: _Look) -> str:
    from tfjob.interfaces.live_view import replica_table

    job = look.jobs[0]
    kind = kind_of(job)
    metadata = job["metadata"]
    now = datetime.now(UTC)
    latest = _latest(job)
    why = ": ".join(x for x in (latest.get("reason"), latest.get("message")) if x)
    views = [replica_view(p, kind) for p in look.pods if kind.owns(p, job)]
    state = kind.state(job)
    table = replica_table(f"{job['kind']} {metadata['name']}", state, views, now).plain
    lines = [
        f"Name:       {metadata['name']}",
        f"Kind:       {job['kind']}",
        f"Namespace:  {metadata.get('namespace', '')}",
        f"State:      {state or 'Created'}" + (f" ({why})" if why else ""),
        f"Age:        {age(metadata.get('creationTimestamp'), now)}",
        "",
        table,
        "",
        _events(await api.events(kind, metadata["name"]), job, now),
    ]
    return "\n".join(lines)


def _events(events: list[Object], job: Object, now: datetime) -> str:
    mine = [e for e in events if (e.get("involvedObject") or {}).get("uid") == _key(job)]
    if not mine:
        return "Events: <none>"
    rows: list[tuple[str, ...]] = [("LAST SEEN", "TYPE", "REASON", "MESSAGE")]
    rows += [
        (
            age(event_time(e) or None, now),
            str(e.get("type", "")),
            str(e.get("reason", "")),
            str(e.get("message", "")),
        )
        for e in mine[-RECENT_EVENTS:]
    ]
    return "Events:\n" + "\n".join("  " + line for line in _layout(rows).splitlines())


# -- as the API holds it ---------------------------------------------------------------


def _objects(jobs: list[Object], name: str | None, output: str) -> str:
    """One job as kubectl prints it (managedFields left out), or a List of them."""
    shown = [_without_managed_fields(j) for j in jobs]
    data: Any = shown[0] if name else {"apiVersion": "v1", "kind": "List", "items": shown}
    if output == "json":
        return msgspec.json.format(msgspec.json.encode(data), indent=4).decode()
    return yaml.safe_dump(data, sort_keys=False).rstrip("\n")


def _without_managed_fields(job: Object) -> Object:
    metadata = {k: v for k, v in job["metadata"].items() if k != "managedFields"}
    return {**job, "metadata": metadata}
