"""What the `tfjob` cluster commands ask of the API server about a user's jobs, of
every kind tfjob knows (`tfjob.frameworks.registry.FRAMEWORKS`).

The operator reads through informers; a person at a terminal wants a handful of
one-off reads instead: one job, its pods, its events, a pod's log (followed or not),
and the create and delete that start and end a job. Objects come back as the plain
JSON the API server sent, so `tfjob get -o yaml` prints exactly what kubectl would and
a submitted job is an ordinary TFJob, PyTorchJob, ...

Nothing here names a kind: a kind is its declaration (`KindDeclaration`), which gives
the resource (`resources.jobs_of`), the label of its pods (`resources.owned_by`) and
the replica-specs field; a job read back is decoded through its kind's model
(`tfjob.frameworks.load`). Which kinds a cluster serves is asked once, by API
discovery: a kind whose CRD is not installed is left out of listings and searches,
and named in the error when a command asks for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api.errors import InvalidJob, PermanentError
from tfjob.api.kinds import KindDeclaration
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, jobs_of, owned_by

Object = dict[str, Any]


def known_kinds() -> list[KindDeclaration]:
    """Every kind tfjob knows, in the registry's order."""
    return list(FRAMEWORKS.values())


def kind_named(text: str) -> KindDeclaration | None:
    """The kind a user names as kubectl takes a resource: `PyTorchJob`, `pytorchjob`,
    `pytorchjobs`, `pytorchjobs.kubeflow.org`; None for no kind tfjob knows."""
    wanted = text.lower()
    for kind in FRAMEWORKS.values():
        names = {kind.kind.lower(), kind.plural}
        if wanted in names | {f"{name}.{kind.group}" for name in names}:
            return kind
    return None


def kind_of(job: Object) -> KindDeclaration:
    """The kind of a job as the API server sent it."""
    return FRAMEWORKS[str(job.get("kind"))]


def resource_name(kind: KindDeclaration) -> str:
    """How kubectl names one object's type in its messages: `pytorchjob.kubeflow.org`."""
    return f"{kind.kind.lower()}.{kind.group}"


def _either(kinds: Sequence[KindDeclaration]) -> str:
    names = [k.kind for k in kinds]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class NoSuchJob(PermanentError):
    """No job of that name, of the kinds looked among, in the namespace."""

    def __init__(self, namespace: str, name: str, kinds: Sequence[KindDeclaration]) -> None:
        super().__init__(f'no {_either(kinds)} "{name}" in namespace {namespace}')


class AmbiguousJob(PermanentError):
    """Jobs of several kinds have the name: the user must say which."""

    def __init__(self, namespace: str, name: str, kinds: Sequence[KindDeclaration]) -> None:
        which = " and a ".join(k.kind for k in kinds)
        choices = " or ".join(f"{k.kind.lower()}/{name}" for k in kinds)
        super().__init__(f'"{name}" is a {which} in namespace {namespace}: say which, as {choices}')


class NoJobApi(PermanentError):
    """The cluster does not serve these kinds: their CRDs are not installed."""

    def __init__(self, kinds: Sequence[KindDeclaration]) -> None:
        fix = "kubectl apply -k manifests/base, or install Kubeflow's training operator"
        if len(kinds) == 1:
            kind = kinds[0]
            super().__init__(
                f"the cluster has no {jobs_of(kind)} resource (the {kind.kind} CRD is not "
                f"installed): {fix}"
            )
            return
        names = ", ".join(str(jobs_of(k)) for k in kinds)
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
        self._served: list[KindDeclaration] | None = None

    # -- which kinds ------------------------------------------------------------------

    async def served(self) -> list[KindDeclaration]:
        """The kinds whose CRD the cluster has, in the registry's order (asked once);
        NoJobApi when it has none of them."""
        if self._served is None:
            versions = sorted({(k.group, k.version) for k in FRAMEWORKS.values()})
            plurals = await asyncio.gather(*(self._plurals(g, v) for g, v in versions))
            found = dict(zip(versions, plurals, strict=True))
            self._served = [
                k for k in FRAMEWORKS.values() if k.plural in found[(k.group, k.version)]
            ]
        if not self._served:
            raise NoJobApi(known_kinds())
        return self._served

    async def serving(self, kind: KindDeclaration) -> KindDeclaration:
        """`kind`, once the cluster is known to serve it; NoJobApi naming it otherwise."""
        try:
            served = await self.served()
        except NoJobApi:
            served = []
        if kind not in served:
            raise NoJobApi([kind])
        return kind

    # -- jobs -------------------------------------------------------------------------

    async def create(self, document: Object) -> Object:
        """Create the job as written; its kind is its `kind` field."""
        kind = await self.serving(kind_of(document))
        return _labelled(kind, await self.client.create(jobs_of(kind), self.namespace, document))

    async def get(self, kind: KindDeclaration, name: str) -> Object:
        found = await self._get_or_none(await self.serving(kind), name)
        if found is None:
            raise NoSuchJob(self.namespace, name, [kind])
        return found

    async def find(self, name: str, kind: KindDeclaration | None = None) -> Object:
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

    async def list_jobs(self, kind: KindDeclaration | None = None) -> list[Object]:
        """The jobs of `kind`, or of every kind the cluster serves, by name."""
        kinds = [await self.serving(kind)] if kind is not None else await self.served()
        lists = await asyncio.gather(*(self._list(k) for k in kinds))
        order = {k.kind: i for i, k in enumerate(kinds)}
        jobs = [job for listed in lists for job in listed]
        return sorted(jobs, key=lambda j: (str(j["metadata"].get("name")), order[j["kind"]]))

    async def delete(self, kind: KindDeclaration, name: str) -> None:
        """Background propagation, as kubectl: the garbage collector removes the pods."""
        resource = jobs_of(await self.serving(kind))
        found = await self.client.delete(resource, self.namespace, name, propagation="Background")
        if found is None:
            raise NoSuchJob(self.namespace, name, [kind])

    # -- what belongs to a job ----------------------------------------------------------

    async def pods(
        self, kind: KindDeclaration | None = None, job_name: str | None = None
    ) -> list[Object]:
        """The pods of one job (by its kind's operator-name label and the job-name
        label), or of every job (anything carrying the job-name label)."""
        selector = c.LABEL_JOB_NAME
        if kind is not None and job_name is not None:
            selector = f"{owned_by(kind)},{c.LABEL_JOB_NAME}={job_name}"
        return await self._all(PODS.path(self.namespace), {"labelSelector": selector})

    async def events(self, kind: KindDeclaration, name: str) -> list[Object]:
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

    async def _get_or_none(self, kind: KindDeclaration, name: str) -> Object | None:
        try:
            return _labelled(kind, await self.client.get(jobs_of(kind), self.namespace, name))
        except ApiError as error:
            if error.not_found:
                return None
            raise

    async def _list(self, kind: KindDeclaration) -> list[Object]:
        items = await self._all(jobs_of(kind).path(self.namespace), {})
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
    """The replicas a job asks for, by replica type as written, read through its
    kind's model; empty for a job the model cannot hold (made by another tool)."""
    try:
        typed = decode_job(job, FRAMEWORKS[str(job.get("kind"))].job_type)
    except InvalidJob:
        return {}
    return {
        name: 1 if spec.replicas is None else spec.replicas
        for name, spec in typed.spec.replica_specs.items()
    }


def _labelled(kind: KindDeclaration, payload: bytes) -> Object:
    return _with_kind(kind, _decode(payload))


def _with_kind(kind: KindDeclaration, job: Object) -> Object:
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
