"""What the `tfjob` cluster commands ask of the API server about a user's jobs, of
every kind tfjob knows (`kinds.CLUSTER_KINDS`: the `kubeflow.org/v1` kinds of
`tfjob.frameworks.registry.FRAMEWORKS`, and Kubeflow Trainer's TrainJob).

The operator reads through informers; a person at a terminal wants a handful of
one-off reads instead: one job, its pods, its events, a pod's log (followed or not),
and the create and delete that start and end a job. Objects come back as the plain
JSON the API server sent, so `tfjob get -o yaml` prints exactly what kubectl would and
a submitted job is an ordinary TFJob, PyTorchJob, TrainJob, ...

Nothing here names a kind: a kind is its `ClusterKind` (kinds.py), which gives the
resource, the label selector of its pods (a v1 kind's operator-name and job-name
labels; a TrainJob's JobSet name) and how its replicas are read. Which kinds a
cluster serves is asked once, by API discovery: a kind whose CRD is not installed is
left out of listings and searches, and named in the error when a command asks for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api.errors import PermanentError
from tfjob.api.kinds import KindDeclaration
from tfjob.interfaces.cluster_client.kinds import (
    CLUSTER_KINDS,
    ClusterKind,
    cluster_kind,
    kind_called,
)
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS

Object = dict[str, Any]
#: A kind as callers hand it: a v1 kind's declaration (its framework) or a ClusterKind.
AnyKind = KindDeclaration | ClusterKind


def known_kinds() -> list[ClusterKind]:
    """Every kind tfjob knows: the v1 kinds in the registry's order, then TrainJob."""
    return list(CLUSTER_KINDS)


def kind_named(text: str) -> AnyKind | None:
    """The kind a user names as kubectl takes a resource: `PyTorchJob`, `pytorchjob`,
    `pytorchjobs`, `pytorchjobs.kubeflow.org`, `trainjob`; None for no kind tfjob
    knows. A v1 kind comes back as its framework's declaration."""
    wanted = text.lower()
    for kind in CLUSTER_KINDS:
        names = {kind.kind.lower(), kind.plural}
        if wanted in names | {f"{name}.{kind.group}" for name in names}:
            return kind.declaration
    return None


def kind_of(job: Object) -> ClusterKind:
    """The kind of a job as the API server sent it."""
    found = kind_called(str(job.get("kind")))
    if found is None:
        raise KeyError(f"no kind of job is called {job.get('kind')!r}")
    return found


def resource_name(kind: AnyKind) -> str:
    """How kubectl names one object's type in its messages: `pytorchjob.kubeflow.org`."""
    return f"{kind.kind.lower()}.{kind.group}"


def _either(kinds: Sequence[AnyKind]) -> str:
    names = [k.kind for k in kinds]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class NoSuchJob(PermanentError):
    """No job of that name, of the kinds looked among, in the namespace."""

    def __init__(self, namespace: str, name: str, kinds: Sequence[AnyKind]) -> None:
        super().__init__(f'no {_either(kinds)} "{name}" in namespace {namespace}')


class AmbiguousJob(PermanentError):
    """Jobs of several kinds have the name: the user must say which."""

    def __init__(self, namespace: str, name: str, kinds: Sequence[AnyKind]) -> None:
        which = " and a ".join(k.kind for k in kinds)
        choices = " or ".join(f"{k.kind.lower()}/{name}" for k in kinds)
        super().__init__(f'"{name}" is a {which} in namespace {namespace}: say which, as {choices}')


class NoJobApi(PermanentError):
    """The cluster does not serve these kinds: their CRDs are not installed."""

    def __init__(self, kinds: Sequence[ClusterKind]) -> None:
        if len(kinds) == 1:
            kind = kinds[0]
            super().__init__(
                f"the cluster has no {kind.resource} resource (the {kind.kind} CRD is not "
                f"installed): {kind.install}"
            )
            return
        names = ", ".join(str(k.resource) for k in kinds)
        fix = kinds[0].install  # manifests/base installs every kind's CRD
        super().__init__(
            f"the cluster has none of the resources {names} (no CRD of a job kind is "
            f"installed): {fix}"
        )


@dataclass(frozen=True)
class LogLine:
    """One line of a container's log, with the time the container runtime gave it."""

    time: str  # RFC 3339 with nanoseconds, as the kubelet writes it
    text: str


class JobsApi:
    """Jobs of every kind, their pods, events and logs in one namespace."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._served: list[ClusterKind] | None = None

    # -- which kinds ------------------------------------------------------------------

    async def served(self) -> list[ClusterKind]:
        """The kinds whose CRD the cluster has, in `known_kinds()` order (asked once);
        NoJobApi when it has none of them."""
        if self._served is None:
            versions = sorted({(k.group, k.version) for k in CLUSTER_KINDS})
            plurals = await asyncio.gather(*(self._plurals(g, v) for g, v in versions))
            found = dict(zip(versions, plurals, strict=True))
            self._served = [k for k in CLUSTER_KINDS if k.plural in found[(k.group, k.version)]]
        if not self._served:
            raise NoJobApi(known_kinds())
        return self._served

    async def serving(self, kind: AnyKind) -> ClusterKind:
        """`kind`, once the cluster is known to serve it; NoJobApi naming it otherwise."""
        wanted = cluster_kind(kind)
        try:
            served = await self.served()
        except NoJobApi:
            served = []
        if wanted not in served:
            raise NoJobApi([wanted])
        return wanted

    # -- jobs -------------------------------------------------------------------------

    async def create(self, document: Object) -> Object:
        """Create the job as written; its kind is its `kind` field."""
        kind = await self.serving(kind_of(document))
        return _labelled(kind, await self.client.create(kind.resource, self.namespace, document))

    async def get(self, kind: AnyKind, name: str) -> Object:
        found = await self._get_or_none(await self.serving(kind), name)
        if found is None:
            raise NoSuchJob(self.namespace, name, [kind])
        return found

    async def find(self, name: str, kind: AnyKind | None = None) -> Object:
        """The job named `name`: of `kind`, or of whichever kind the cluster serves
        holds it (AmbiguousJob when several do)."""
        if kind is not None:
            return await self.get(kind, name)
        kinds = await self.served()
        found = await asyncio.gather(*(self._get_or_none(k, name) for k in kinds))
        jobs = [job for job in found if job is not None]
        if not jobs:
            raise NoSuchJob(self.namespace, name, kinds)
        if len(jobs) > 1:
            raise AmbiguousJob(self.namespace, name, [kind_of(j) for j in jobs])
        return jobs[0]

    async def list_jobs(self, kind: AnyKind | None = None) -> list[Object]:
        """The jobs of `kind`, or of every kind the cluster serves, by name."""
        kinds = [await self.serving(kind)] if kind is not None else await self.served()
        lists = await asyncio.gather(*(self._list(k) for k in kinds))
        order = {k.kind: i for i, k in enumerate(kinds)}
        jobs = [job for listed in lists for job in listed]
        return sorted(jobs, key=lambda j: (str(j["metadata"].get("name")), order[j["kind"]]))

    async def delete(self, kind: AnyKind, name: str) -> None:
        """Background propagation, as kubectl: the garbage collector removes the pods
        (a TrainJob's JobSet, its Jobs, then their pods)."""
        resource = (await self.serving(kind)).resource
        found = await self.client.delete(resource, self.namespace, name, propagation="Background")
        if found is None:
            raise NoSuchJob(self.namespace, name, [kind])

    # -- what belongs to a job ----------------------------------------------------------

    async def pods(self, kind: AnyKind | None = None, job_name: str | None = None) -> list[Object]:
        """The pods of one job (by its kind's selector: a v1 kind's operator-name and
        job-name labels, a TrainJob's JobSet name), or of every job of every kind the
        cluster serves, by name."""
        if kind is not None and job_name is not None:
            selector = cluster_kind(kind).pod_selector(job_name)
            return await self._all(PODS.path(self.namespace), {"labelSelector": selector})
        try:
            kinds = await self.served()
        except NoJobApi:
            kinds = []
        selectors = sorted({k.pod_selector(None) for k in kinds} or {c.LABEL_JOB_NAME})
        lists = await asyncio.gather(
            *(self._all(PODS.path(self.namespace), {"labelSelector": s}) for s in selectors)
        )
        pods = {_uid_or_name(p): p for listed in lists for p in listed}
        return sorted(pods.values(), key=lambda p: str(p["metadata"].get("name")))

    async def events(self, kind: AnyKind, name: str) -> list[Object]:
        """The events about one job, oldest first."""
        selector = f"involvedObject.kind={kind.kind},involvedObject.name={name}"
        events = await self._all(EVENTS.path(self.namespace), {"fieldSelector": selector})
        return sorted(events, key=event_time)

    async def log(
        self,
        pod: str,
        container: str,
        *,
        follow: bool = False,
        since_seconds: int | None = None,
        since_time: str | None = None,
    ) -> AsyncGenerator[LogLine, None]:
        """A container's log through the API server (which asks the pod's kubelet),
        every line with its timestamp; followed, it lasts as long as the container."""
        params = {"container": container, "timestamps": "true"}
        if follow:
            params["follow"] = "true"
        if since_time:
            params["sinceTime"] = since_time
        elif since_seconds is not None:
            params["sinceSeconds"] = str(max(since_seconds, 1))
        path = PODS.path(self.namespace, pod, "log")
        async for raw in self.client.stream_lines(path, params):
            time, _, text = raw.decode(errors="replace").rstrip("\r").partition(" ")
            yield LogLine(time, text)

    # -- internals --------------------------------------------------------------------

    async def _get_or_none(self, kind: ClusterKind, name: str) -> Object | None:
        try:
            return _labelled(kind, await self.client.get(kind.resource, self.namespace, name))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    async def _list(self, kind: ClusterKind) -> list[Object]:
        items = await self._all(kind.resource.path(self.namespace), {})
        return [_with_kind(kind, item) for item in items]

    async def _all(self, path: str, params: dict[str, str]) -> list[Object]:
        items: list[Object] = []
        page: dict[str, str] = {**params, "limit": "500"}
        while True:
            body = _decode(await self.client.get_path(path, page))
            items.extend(body.get("items") or [])
            more = (body.get("metadata") or {}).get("continue")
            if not more:
                return items
            page = {**params, "limit": "500", "continue": more}

    async def _plurals(self, group: str, version: str) -> set[str]:
        """The resources of one API group version, by API discovery; none when the
        cluster has no such group."""
        try:
            body = _decode(await self.client.get_path(f"/apis/{group}/{version}"))
        except ApiError as error:
            if error.not_found:
                return set()
            raise
        return {str(r.get("name")) for r in body.get("resources") or []}


def replicas_asked(job: Object) -> dict[str, int]:
    """The replicas a job asks for, by replica type as written, read as its kind
    reads them; empty for a job whose kind's model cannot hold it (made by another
    tool) or that leaves the number to its runtime (a TrainJob without numNodes)."""
    return kind_of(job).replicas_asked(job)


def _uid_or_name(pod: Object) -> str:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("uid") or metadata.get("name"))


def _labelled(kind: ClusterKind, payload: bytes) -> Object:
    return _with_kind(kind, _decode(payload))


def _with_kind(kind: ClusterKind, job: Object) -> Object:
    """The job with its apiVersion and kind, which an item of a list may leave out."""
    return {"apiVersion": kind.api_version, "kind": kind.kind, **job}


def _decode(payload: bytes) -> Object:
    decoded = msgspec.json.decode(payload)
    if not isinstance(decoded, dict):
        raise ApiError(500, "BadResponse", "the API server answered with something not an object")
    return decoded


def event_time(event: Object) -> str:
    """When an event last happened, whichever of its time fields the writer filled."""
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
