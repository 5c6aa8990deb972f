"""`tfjob get [NAME] [-w] [-o wide|yaml|json]`: TFJobs on the cluster, as a person
reads them (state, replicas, restarts, age) or as the API holds them."""

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
    Target,
    age,
    cluster_options,
    on_cluster,
)
from tfjob.runtimes.kubernetes.follow import POLL_INTERVAL, owned_by, replica_view, state
from tfjob.runtimes.kubernetes.jobs_api import JobsApi, Object, event_time

_COLUMNS = ("NAME", "STATE", "READY", "SUCCEEDED", "FAILED", "RESTARTS", "AGE")
_WIDE = ("REPLICAS", "REASON")
RECENT_EVENTS = 10


@dataclass(frozen=True)
class _Look:
    """One read of the namespace (or of one job): the jobs and their pods."""

    jobs: list[Object]
    pods: list[Object]


@click.command(name="get")
@click.argument("name", required=False)
@click.option("--watch", "-w", is_flag=True, help="After the first listing, print each change.")
@click.option("--output", "-o", type=click.Choice(["wide", "yaml", "json"]), help="Output format.")
@cluster_options
def command(name: str | None, watch: bool, output: str | None, target: Target) -> None:
    """Show the TFJobs in the namespace, or one of them.

    \b
    Without NAME: one line per job - state, pods ready (of the replicas asked for),
    replicas succeeded and failed, restarts, age (-o wide: the replica types and the
    latest condition's reason). With NAME: the job, the table of its replicas that
    `tfjob run` shows, and its recent events. -o yaml|json prints the TFJob object(s)
    as kubectl does. -w prints a line (or object) again whenever it changes; Ctrl-C
    ends it.

    \b
    Exit status: 0, 2 unknown job, 3 cluster unusable, 130 Ctrl-C during -w.
    """
    try:
        on_cluster(target, lambda api: _show(api, name, watch, output))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


async def _show(api: JobsApi, name: str | None, watch: bool, output: str | None) -> None:
    look = await _look(api, name)
    if watch:
        await _watch(api, name, output, look)
    elif name and output is None:
        click.echo(await _describe(api, look))
    elif output in ("yaml", "json"):
        click.echo(_objects(look.jobs, name, output))
    elif look.jobs:
        click.echo(_layout(_rows(look, wide=output == "wide")))
    else:
        click.echo(f"No TFJobs in namespace {api.namespace}.", err=True)


async def _watch(api: JobsApi, name: str | None, output: str | None, look: _Look) -> None:
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
        look = await _look(api, name)


async def _look(api: JobsApi, name: str | None) -> _Look:
    jobs = [await api.get(name)] if name else await api.list_jobs()
    return _Look(jobs, await api.pods(name))


def _change(job: Object, pods: list[Object], output: str | None) -> tuple[str, ...]:
    """What -w reports a change of: a new version of the object for yaml/json, else a
    change of the job's line (its age aside, which changes by itself)."""
    if output in ("yaml", "json"):
        return (str(job["metadata"].get("resourceVersion", "")),)
    row = _row(job, pods, wide=True)
    return (*row[:6], *row[7:])


def _key(job: Object) -> str:
    return str(job["metadata"].get("uid", ""))


# -- one line per job ------------------------------------------------------------------


def _rows(look: _Look, *, wide: bool) -> list[tuple[str, ...]]:
    head = _COLUMNS + _WIDE if wide else _COLUMNS
    return [head, *(_row(job, look.pods, wide) for job in look.jobs)]


def _row(job: Object, pods: list[Object], wide: bool) -> tuple[str, ...]:
    metadata, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    specs = spec.get("tfReplicaSpecs") or {}
    mine = [p for p in pods if owned_by(p, job)]
    wanted = sum(int((s or {}).get("replicas", 1)) for s in specs.values())
    ready = sum(1 for p in mine if _ready(p))
    counts = (status.get("replicaStatuses") or {}).values()
    restarts = int(status.get("restartCount", 0)) + sum(replica_view(p).restarts for p in mine)
    row = (
        str(metadata["name"]),
        state(job) or "Created",
        f"{ready}/{wanted}",
        str(sum(int(r.get("succeeded", 0)) for r in counts)),
        str(sum(int(r.get("failed", 0)) for r in counts)),
        str(restarts),
        age(metadata.get("creationTimestamp"), datetime.now(UTC)),
    )
    if not wide:
        return row
    types = ",".join(f"{t}:{(s or {}).get('replicas', 1)}" for t, s in specs.items())
    conditions = status.get("conditions") or []
    return (*row, types or "-", str(conditions[-1].get("reason", "")) if conditions else "-")


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
    metadata, status = job["metadata"], job.get("status") or {}
    now = datetime.now(UTC)
    conditions = status.get("conditions") or []
    latest = conditions[-1] if conditions else {}
    why = ": ".join(x for x in (latest.get("reason"), latest.get("message")) if x)
    views = [replica_view(p) for p in look.pods if owned_by(p, job)]
    table = replica_table(metadata["name"], state(job), views, now).plain
    lines = [
        f"Name:       {metadata['name']}",
        f"Namespace:  {metadata.get('namespace', '')}",
        f"State:      {state(job) or 'Created'}" + (f" ({why})" if why else ""),
        f"Age:        {age(metadata.get('creationTimestamp'), now)}",
        "",
        table,
        "",
        _events(await api.events("TFJob", metadata["name"]), job, now),
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
    """One TFJob as kubectl prints it (managedFields left out), or a List of them."""
    shown = [_without_managed_fields(j) for j in jobs]
    data: Any = shown[0] if name else {"apiVersion": "v1", "kind": "List", "items": shown}
    if output == "json":
        return msgspec.json.format(msgspec.json.encode(data), indent=4).decode()
    return yaml.safe_dump(data, sort_keys=False).rstrip("\n")


def _without_managed_fields(job: Object) -> Object:
    metadata = {k: v for k, v in job["metadata"].items() if k != "managedFields"}
    return {**job, "metadata": metadata}
