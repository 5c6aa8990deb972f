"""Writing a job's status: one conditional PUT of the status subresource.

The PUT carries the resourceVersion of the job the status was decided from, so the
API server refuses it (409) if the job changed since. A conflict is not always a
conflict of statuses: a spec or metadata change (a label, an annotation, Kueue's
`suspend`) also moves the version. So on 409 the job is read again: if its status is
still the one decided from, the PUT is sent again at the fresh version; if someone
else changed the status, our decision is stale and `StatusConflict` says so, with
the resourceVersion that was read (the job is held until its cache shows it, then
decided again: consistency.py).

One writer for every kind: a v1 kind's (`StatusWriter(client, kind)`) and the
TrainJob's (`StatusWriter.for_trainjob`), which differ only in the resource and in how
a job read back is decoded to compare its status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from tfjob.api import trainjob as tj
from tfjob.api.errors import TemporaryError
from tfjob.api.kinds import KindDeclaration
from tfjob.api.types import ObjectMeta
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.decode import decode_job_head, resource_version_of
from tfjob.runtimes.kubernetes.transport.resources import TRAINJOBS, Resource, jobs_of

# A job as read back: its metadata and its status, to compare with the one decided from.
ReadHead = Callable[[bytes], tuple[ObjectMeta, Any]]

STATUS_ATTEMPTS = 3


class StatusConflict(TemporaryError):
    """Someone else changed the job's status since we read it: decide again, from the
    job at `resource_version` or later."""

    def __init__(self, message: str, resource_version: str = "") -> None:
        super().__init__(message, delay=0.0)
        self.resource_version = resource_version


class StatusWriter:
    """Writes one kind's job statuses with the conflict rule above."""

    def __init__(
        self,
        client: KubeClient,
        kind: KindDeclaration | None = None,
        *,
        resource: Resource | None = None,
        api_version: str = "",
        kind_name: str = "",
        read_head: ReadHead = decode_job_head,
    ) -> None:
        """A v1 kind's (`kind`), or any other's named by the keywords."""
        self._client = client
        self._api_version = kind.api_version if kind else api_version
        self._kind_name = kind.kind if kind else kind_name
        resource = jobs_of(kind) if kind else resource
        assert resource is not None, "a kind or a resource"
        self._jobs = resource
        self._read_head = read_head

    @classmethod
    def for_trainjob(cls, client: KubeClient) -> StatusWriter:
        return cls(
            client,
            resource=TRAINJOBS,
            api_version=tj.API_VERSION,
            kind_name=tj.KIND,
            read_head=_trainjob_head,
        )

    async def write(
        self, meta: ObjectMeta, base: msgspec.Struct, status: msgspec.Struct
    ) -> str | None:
        """PUT `status` for the job `meta` whose status was `base` when it was decided.

        Returns the resourceVersion written, or None if the job is gone (404). Raises
        StatusConflict, or the API error of a failed request."""
        body: dict[str, Any] = {
            "apiVersion": self._api_version,
            "kind": self._kind_name,
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "resourceVersion": meta.resource_version,
            },
            "status": msgspec.to_builtins(status),
        }
        for _attempt in range(STATUS_ATTEMPTS):
            try:
                raw = await self._client.replace_status(self._jobs, meta.namespace, meta.name, body)
            except ApiError as error:
                if error.not_found:
                    return None
                if not error.conflict:
                    raise
                body["metadata"]["resourceVersion"] = await self._fresh_version(meta, base)
                continue
            return resource_version_of(raw)
        raise StatusConflict(f"status of {meta.namespace}/{meta.name} kept changing")

    async def _fresh_version(self, meta: ObjectMeta, base: msgspec.Struct) -> str:
        fresh, status = self._read_head(
            await self._client.get(self._jobs, meta.namespace, meta.name)
        )
        version = fresh.resource_version
        if fresh.uid != meta.uid or status != base:
            message = f"status of {meta.namespace}/{meta.name} changed meanwhile"
            raise StatusConflict(message, version)
        return version


def _trainjob_head(raw: bytes) -> tuple[ObjectMeta, Any]:
    trainjob = tj.decode_trainjob(msgspec.json.decode(raw))
    return trainjob.metadata, trainjob.status
