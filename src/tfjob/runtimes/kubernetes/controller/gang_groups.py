"""Gang scheduling on Kubernetes: read, create, update and delete a job's group objects.

The core decides (tfjob.core.gang, reconcile); this module only talks to the API:
- `observe` GETs the job's group objects before each reconcile (one GET per kind:
  a Workload and a PodGroup for native Kubernetes, one PodGroup otherwise). There is
  no informer for them: the operator only needs them while it creates a job's pods,
  and Volcano's admission of a PodGroup is polled by a timed requeue instead;
- `act` carries out CreateGroup / DeleteGroup, with the same events as pods, and
  UpdateGroup, a PUT with no event (upstream records none for it). A failed update
  (409: the group changed since it was read; 404: it is gone) is returned like any
  failed action, so the job is reconciled again with backoff, from a fresh GET;
- `check_served` runs at start-up: the group API must be served (the CRD installed,
  or for native Kubernetes the alpha API enabled), else the operator exits.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.errors import PermanentError
from tfjob.core import gang
from tfjob.core.plan import CreateGroup, DeleteGroup, GroupKind, UpdateGroup
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import Resource


class GangUnavailable(PermanentError):
    """The gang scheduler's group API is not served by this cluster."""


def _resource(kind: GroupKind) -> Resource:
    return Resource(kind.group, kind.version, kind.plural)


class GangGroups:
    """The API side of one operator's gang scheduling (`scheduler_name` not empty)."""

    def __init__(
        self, client: KubeClient, recorder: EventRecorder, metrics: Metrics, scheduler_name: str
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._metrics = metrics
        self._kinds = gang.group_kinds(scheduler_name)
        self.scheduler_name = scheduler_name

    async def check_served(self, namespace: str | None) -> None:
        """Raise GangUnavailable naming the missing API and the fix."""
        for kind in self._kinds:
            try:
                await self._client.list(_resource(kind), namespace, limit=1)
            except ApiError as error:
                if error.not_found:
                    raise GangUnavailable(
                        f"--gang-scheduler-name {self.scheduler_name} needs {kind.kind} "
                        f"({kind.api_version}), which this cluster does not serve: " + _fix(kind)
                    ) from error
                raise

    async def observe(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The job's group objects that exist now."""
        found: list[dict[str, Any]] = []
        for kind in self._kinds:
            try:
                raw = await self._client.get(_resource(kind), namespace, name)
            except ApiError as error:
                if error.not_found:
                    continue
                raise
            found.append(msgspec.json.decode(raw))
        return found

    async def act(
        self, ref: ObjectRef, action: CreateGroup | UpdateGroup | DeleteGroup
    ) -> Exception | None:
        """Carry out one group action; the error (recorded as an event for a create or
        delete) or None."""
        if isinstance(action, UpdateGroup):
            return await self._update(ref, action)
        resource = _resource(action.kind)
        noun = action.kind.kind
        try:
            if isinstance(action, CreateGroup):
                await self._client.create(resource, ref.namespace, action.manifest)
            else:
                await self._client.delete(resource, ref.namespace, action.name)
        except ApiError as error:
            if isinstance(action, CreateGroup) and error.already_exists:
                return None
            return self._failed(ref, action, error)
        except TransportError as error:
            return self._failed(ref, action, error)
        verb = "Create" if isinstance(action, CreateGroup) else "Delete"
        self._recorder.record(
            ref, "Normal", f"Successful{verb}{noun}", f"{verb}d {noun}: {action.name}"
        )
        if noun == "PodGroup":  # upstream's counters (a native Workload is not counted)
            created = verb == "Create"
            (
                self._metrics.pod_groups_created if created else self._metrics.pod_groups_deleted
            ).inc()
        return None

    async def _update(self, ref: ObjectRef, action: UpdateGroup) -> Exception | None:
        """PUT the group with its new spec; the error, if any, for the caller to retry."""
        resource = _resource(action.kind)
        try:
            await self._client.replace(resource, ref.namespace, action.name, action.manifest)
        except (ApiError, TransportError) as error:
            return error
        return None

    def _failed(
        self, ref: ObjectRef, action: CreateGroup | DeleteGroup, error: Exception
    ) -> Exception:
        verb = "Create" if isinstance(action, CreateGroup) else "Delete"
        doing = "creating" if verb == "Create" else "deleting"
        self._recorder.record(
            ref, "Warning", f"Failed{verb}{action.kind.kind}", f"Error {doing}: {error}"
        )
        return error


def _fix(kind: GroupKind) -> str:
    if kind.group == "scheduling.k8s.io":
        return (
            "run kube-apiserver 1.36+ with --runtime-config=scheduling.k8s.io/v1alpha2=true "
            "and --feature-gates=GenericWorkload=true,GangScheduling=true"
        )
    return f"install the {kind.plural}.{kind.group} CustomResourceDefinition (the scheduler's)"
