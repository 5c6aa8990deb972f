"""What the `tfjob` cluster commands ask of the API server about a user's TFJobs.

The operator reads through informers; a person at a terminal wants a handful of
one-off reads instead: one job, its pods, its events, a pod's log (followed or not),
and the create and delete that start and end a job. Objects come back as the plain
JSON the API server sent, so `tfjob get -o yaml` prints exactly what kubectl would and
a submitted job is an ordinary TFJob.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from tfjob.api import constants as c
from tfjob.api.errors import PermanentError
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.resources import EVENTS, PODS, TFJOBS

Object = dict[str, Any]
T = TypeVar("T")


class NoSuchJob(PermanentError):
    """The named TFJob does not exist in the namespace."""

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(f'no TFJob "{name}" in namespace {namespace}')


class NoTFJobApi(PermanentError):
    """The cluster does not serve kubeflow.org/v1 TFJobs: the CRD is not installed."""

    def __init__(self) -> None:
        super().__init__(
            f"the cluster has no {c.PLURAL}.{c.GROUP} resource (the TFJob CRD is not "
            "installed): kubectl apply -k manifests/base, or install Kubeflow's "
            "training operator"
        )


@dataclass(frozen=True)
class LogLine:
    """One line of a container's log, with the time the container runtime gave it."""

    time: str  # RFC 3339 with nanoseconds, as the kubelet writes it
    text: str


class JobsApi:
    """TFJobs, their pods, events and logs in one namespace."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    # -- TFJobs -----------------------------------------------------------------------

    async def create(self, document: Object) -> Object:
        return _decode(await self._checked(self.client.create(TFJOBS, self.namespace, document)))

    async def get(self, name: str) -> Object:
        try:
            return _decode(await self._checked(self.client.get(TFJOBS, self.namespace, name)))
        except ApiError as error:
            if error.not_found:
                raise NoSuchJob(self.namespace, name) from None
            raise

    async def list_jobs(self) -> list[Object]:
        return await self._all(TFJOBS.path(self.namespace), {})

    async def delete(self, name: str) -> None:
        """Background propagation, as kubectl: the garbage collector removes the pods."""
        found = await self._checked(
            self.client.delete(TFJOBS, self.namespace, name, propagation="Background")
        )
        if found is None:
            raise NoSuchJob(self.namespace, name)

    # -- what belongs to a job ----------------------------------------------------------

    async def pods(self, job_name: str | None = None) -> list[Object]:
        """The pods of one job, or of every job (anything carrying the job-name label)."""
        selector = f"{c.LABEL_JOB_NAME}={job_name}" if job_name else c.LABEL_JOB_NAME
        return await self._all(PODS.path(self.namespace), {"labelSelector": selector})

    async def events(self, kind: str, name: str) -> list[Object]:
        """The events about one object, oldest first."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
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

    async def _all(self, path: str, params: dict[str, str]) -> list[Object]:
        items: list[Object] = []
        page: dict[str, str] = {**params, "limit": "500"}
        while True:
            body = _decode(await self._checked(self.client.get_path(path, page)))
            items.extend(body.get("items") or [])
            more = (body.get("metadata") or {}).get("continue")
            if not more:
                return items
            page = {**params, "limit": "500", "continue": more}

    async def _checked(self, request: Awaitable[T]) -> T:
        """Await a request; a 404 that comes from a missing API (rather than a missing
        object) becomes NoTFJobApi."""
        try:
            return await request
        except ApiError as error:
            if error.not_found and not await self._serves_tfjobs():
                raise NoTFJobApi() from None
            raise

    async def _serves_tfjobs(self) -> bool:
        try:
            body = _decode(await self.client.get_path(f"/apis/{c.API_VERSION}"))
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return any(r.get("name") == c.PLURAL for r in body.get("resources") or [])


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
