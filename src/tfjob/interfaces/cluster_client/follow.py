"""Following a job (of any kind) on a cluster: its state, its pods, its events and every replica's
output, reported through the same observer a local run reports to.

The follower polls the job and its pods once a second (two cheap GETs; a person
watching a table notices nothing finer) and keeps one followed log stream per
container it has seen start. A stream ends when its container stops; it is opened
again when the container restarts in place, and a pod recreated under the same name
(a new uid) gets new streams. Lines already shown are recognised by their timestamp,
so re-opening a stream never repeats a line.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from tfjob.api.errors import PermanentError
from tfjob.api.timestamps import parse_rfc3339
from tfjob.core.plan import Event
from tfjob.core.progress import ReplicaView, RunObserver
from tfjob.interfaces.cluster_client.jobs_api import AnyKind, JobsApi, NoSuchJob, Object
from tfjob.interfaces.cluster_client.kinds import (
    CLUSTER_KINDS,
    ClusterKind,
    cluster_kind,
    kind_called,
)
from tfjob.runtimes.kubernetes.transport.client import ApiError, TransportError

POLL_INTERVAL = 1.0
# After the job finishes: how long the streams may stay quiet before they are closed
# (a kubelet ends a followed stream when its container stops; a simulated one may not).
DRAIN_QUIET = 1.5
DRAIN_LIMIT = 10.0
# How long the API server may stay unreachable while a job is followed (a restarting
# control plane, a network blip) before following gives up.
OUTAGE_LIMIT = 60.0
_TERMINAL_PHASES = ("Succeeded", "Failed")
_V1 = CLUSTER_KINDS[0]  # how a job with no `kind` field is read (every v1 kind alike)


class JobDeleted(PermanentError):
    """The followed job was deleted (or replaced by another of the same name)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} was deleted before it finished")


@dataclass(frozen=True)
class FollowOptions:
    logs: bool = True
    events: bool = True
    replica: str | None = None  # only this replica's output (e.g. "worker-1")
    since_seconds: int | None = None  # first opening of each stream only
    until_finished: bool = True  # False: stop after one look (`tfjob logs` without -f)
    interval: float = POLL_INTERVAL


def _kind(job: Object) -> ClusterKind:
    """The job's kind by its `kind` field; a v1 kind's reading for a job without one."""
    return kind_called(str(job.get("kind"))) or _V1


def state(job: Object) -> str:
    """The job's state as its kind reads it: its latest condition type (e.g.
    "Running"; a TrainJob's latest that holds), "" before the first."""
    return _kind(job).state(job)


def is_finished(job: Object) -> bool:
    """Whether the job has its kind's success or failure condition."""
    return _kind(job).finished(job)


def replica_view(pod: Object, kind: AnyKind | None = None) -> ReplicaView:
    """One pod of a job of `kind` (a v1 kind when not given) as the live table shows it."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    started = status.get("startTime")
    return ReplicaView(
        replica=cluster_kind(kind or _V1).replica(metadata),
        pod_name=str(metadata.get("name", "")),
        phase=str(status.get("phase") or "Pending"),
        restarts=sum(int(s.get("restartCount", 0)) for s in _statuses(pod)),
        started_at=parse_rfc3339(started) if started else None,
        terminating=metadata.get("deletionTimestamp") is not None,
    )


def owned_by(pod: Object, job: Object) -> bool:
    """Whether the pod belongs to this job, not to an earlier one of the same name
    whose pods are still going away."""
    return _kind(job).owns(pod, job)


def _statuses(pod: Object) -> list[Object]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def time_key(stamp: str) -> tuple[str, str]:
    """An RFC 3339 time that sorts correctly with any number of fraction digits."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return whole, fraction.ljust(9, "0")


@dataclass
class _Stream:
    """One container's followed log."""

    pod: str
    uid: str
    container: str
    label: str
    last: str = ""  # timestamp of the last line shown
    shown_at_last: int = 0  # how many lines shown carry that timestamp
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class JobFollower:
    """Reports one job to an observer until it finishes (or after one look)."""

    def __init__(
        self,
        api: JobsApi,
        kind: AnyKind,
        name: str,
        observer: RunObserver,
        options: FollowOptions | None = None,
    ) -> None:
        self._api = api
        self._kind = cluster_kind(kind)
        self._name = name
        self._observer = observer
        self._options = options or FollowOptions()
        self._pods: dict[str, Object] = {}  # by name, as of the last look
        self._streams: dict[tuple[str, str], _Stream] = {}  # by (pod uid, container)
        self._seen_events: set[str] = set()
        self._shown: tuple[str, list[ReplicaView]] | None = None
        self._last_line_at = 0.0
        self._uid: str | None = None  # of the job, once seen

    async def follow(self) -> Object:
        """Follow until the job finishes; returns it as last read."""
        try:
            if not self._options.until_finished:
                return await self._look_once()
            while True:
                job = await self._look_patiently()
                if self._kind.finished(job):
                    break
                await asyncio.sleep(self._options.interval)
            await self._drain()
            return job
        finally:
            await self._close()

    async def _look_once(self) -> Object:
        """Every container's log so far, one replica after another."""
        job = await self._look()
        for stream in sorted(self._streams.values(), key=lambda s: s.label):
            await self._read(stream, follow=False)
        return job

    async def _look_patiently(self) -> Object:
        """A look; while the API server cannot be reached, try again every second (the
        first failure reported as a warning) until OUTAGE_LIMIT passes."""
        loop = asyncio.get_running_loop()
        since: float | None = None
        while True:
            try:
                return await self._look()
            except TransportError as error:
                if since is None:
                    since = loop.time()
                    self._observer.event(
                        Event(type="Warning", reason="Unreachable", message=f"API server: {error}")
                    )
                if loop.time() - since > OUTAGE_LIMIT:
                    raise
                await asyncio.sleep(self._options.interval)

    async def _look(self) -> Object:
        job = await self._job()
        pods = sorted(
            (p for p in await self._api.pods(self._kind, self._name) if self._kind.owns(p, job)),
            key=_pod_name,
        )
        self._pods = {_pod_name(p): p for p in pods}
        if self._options.events:
            await self._report_events(job)
        views = [replica_view(p, self._kind) for p in pods]
        now = self._kind.state(job)
        if self._shown != (now, views):
            self._shown = (now, views)
            self._observer.progress(now, views)
        if self._options.logs:
            self._open_streams(pods)
        return job

    async def _job(self) -> Object:
        """The job; JobDeleted once the one seen before is gone (or was replaced)."""
        try:
            job = await self._api.get(self._kind, self._name)
        except NoSuchJob:
            if self._uid is not None:
                raise JobDeleted(self._name) from None
            raise
        uid = str((job.get("metadata") or {}).get("uid", ""))
        if self._uid is not None and uid != self._uid:
            raise JobDeleted(self._name)
        self._uid = uid
        return job

    async def _report_events(self, job: Object) -> None:
        uid = (job.get("metadata") or {}).get("uid")
        for event in await self._api.events(self._kind, self._name):
            # A repeat is folded into the same Event with a higher count: show it again.
            count = event.get("count") or (event.get("series") or {}).get("count") or 1
            key = f"{(event.get('metadata') or {}).get('uid', '')}/{count}"
            if key in self._seen_events or (event.get("involvedObject") or {}).get("uid") != uid:
                continue
            self._seen_events.add(key)
            self._observer.event(
                Event(
                    type=str(event.get("type") or "Normal"),
                    reason=str(event.get("reason") or ""),
                    message=str(event.get("message") or ""),
                )
            )

    def _open_streams(self, pods: list[Object]) -> None:
        for pod in pods:
            metadata = pod.get("metadata") or {}
            if self._options.replica and self._kind.replica(metadata) != self._options.replica:
                continue
            for status in _statuses(pod):
                container = str(status.get("name", ""))
                key = (str(metadata.get("uid", "")), container)
                started = {"running", "terminated"} & set(status.get("state") or {})
                if key in self._streams or not started:
                    continue
                stream = _Stream(
                    pod=_pod_name(pod),
                    uid=key[0],
                    container=container,
                    label=self._kind.replica(metadata, container),
                )
                if self._options.until_finished:
                    stream.task = asyncio.create_task(self._stream(stream))
                self._streams[key] = stream

    async def _stream(self, stream: _Stream) -> None:
        """Show a container's output until the pod is gone or finished. The log is
        opened again when the container restarts in place, and while it runs (the
        stream broke, or ended before the status said the container stopped)."""
        opened_at_restart = -1
        while True:
            restarts = self._restarts(stream)
            if restarts is None:
                return  # the pod is gone (or replaced by a new one)
            if self._pod_phase(stream) in _TERMINAL_PHASES:
                await self._read(stream, follow=False)  # what is left, once
                return
            if restarts != opened_at_restart or self._container_running(stream):
                opened_at_restart = restarts
                await self._read(stream, follow=True)
            await asyncio.sleep(self._options.interval)

    async def _read(self, stream: _Stream, follow: bool) -> None:
        """Show the container's lines not shown yet. A stream opened again starts at
        the second of the last line shown, so lines up to it are skipped: older ones,
        and as many of those stamped the same as were already shown (lines written
        together often share a timestamp)."""
        since = self._options.since_seconds if not stream.last else None
        resume_at = time_key(stream.last) if stream.last else None
        to_skip = stream.shown_at_last
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ApiError, TransportError):
            async for line in self._api.log(
                stream.pod,
                stream.container,
                follow=follow,
                since_seconds=since,
                since_time=resume_at[0] + "Z" if resume_at else None,
            ):
                key = time_key(line.time)
                if resume_at is not None and (key < resume_at or (key == resume_at and to_skip)):
                    to_skip -= key == resume_at
                    continue  # shown before the stream was opened again
                same = bool(stream.last) and key == time_key(stream.last)
                stream.shown_at_last = stream.shown_at_last + 1 if same else 1
                stream.last = line.time
                self._last_line_at = loop.time()
                self._observer.log_line(stream.label, line.text)

    def _restarts(self, stream: _Stream) -> int | None:
        status = self._container_status(stream)
        return None if status is None else int(status.get("restartCount", 0))

    def _container_running(self, stream: _Stream) -> bool:
        return "running" in ((self._container_status(stream) or {}).get("state") or {})

    def _container_status(self, stream: _Stream) -> Object | None:
        """The container's status as last seen; None once its pod is gone or replaced."""
        pod = self._pods.get(stream.pod)
        if pod is None or (pod.get("metadata") or {}).get("uid") != stream.uid:
            return None
        found = (s for s in _statuses(pod) if s.get("name") == stream.container)
        return next(found, {})

    def _pod_phase(self, stream: _Stream) -> str:
        return str(((self._pods.get(stream.pod) or {}).get("status") or {}).get("phase", ""))

    async def _drain(self) -> None:
        """Give the streams a moment to deliver their last lines, then close them."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._last_line_at = max(self._last_line_at, started)
        while self._running() and loop.time() - started < DRAIN_LIMIT:
            if loop.time() - self._last_line_at > DRAIN_QUIET:
                break
            await asyncio.sleep(0.1)

    def _running(self) -> list[asyncio.Task[None]]:
        return [s.task for s in self._streams.values() if s.task and not s.task.done()]

    async def _close(self) -> None:
        tasks = self._running()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _pod_name(pod: Object) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))
