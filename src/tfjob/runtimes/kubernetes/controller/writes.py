"""Every write a plan's action becomes, through one path with one policy.

`Writer.write_of` turns an action (a pod, service, owned object, gang group or Kueue
Workload, or the job itself: its deletion, a queued job's suspend; a TrainJob's
objects: `write_of_trainjob`) into a `Write`:
what to send, where, and how it is reported. `Writer.apply` sends it and treats every
answer the same way, whatever the object:
- success: done. Its resourceVersion is noted on the view, so the job is held until
  the caches show it (consistency.py); a create or delete that `announces` records
  `Successful<Verb><Noun>`; the Write's counter counts it;
- AlreadyExists (a create): done, names are fixed, so it is there as wanted. An owned
  object the caches do not show is taken over instead (`Write.on_exists`);
- NotFound (a delete): already gone (the client answers None): done, as a success; so
  is a pod delete whose uid precondition fails: the pod the plan saw is gone, and the
  one of that name now is a replacement it must not touch;
- RequestTimeout: the write may have gone through. Done, with no Event: the watch will
  tell, and a repeat is harmless (fixed names, conditional PUTs, deletes of what is
  gone);
- any other error, a 409 included: not done. A create or delete records
  `Failed<Verb><Noun>`; the error is returned, so the job is retried (one refused as
  sent, 400/422, only once it changes: reconciler.py).
A replace (a conditional PUT of an owned object or a gang group, or of a Kueue
Workload's status) and a patch (the job's `spec.runPolicy.suspend`, conditional on the
job's resourceVersion) record no Event, as upstream records none: their 409 is
routine (the object changed since it was read) and the job is reconciled again from
the caches. A server-side apply (a TrainJob's JobSet, snapshot, hostfile, PodGroup:
field manager `trainer`, forced, as Trainer applies them, so a swap between Trainer
and tfjob keeps one owner of the fields) records none either, as Trainer records none.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tfjob.core.objects import PodRenderer
from tfjob.core.plan import (
    Action,
    CreateGroup,
    CreateOwned,
    CreatePod,
    CreateService,
    DeleteGroup,
    DeleteJob,
    DeleteOwned,
    DeletePod,
    DeleteService,
    SetSuspend,
    UpdateGroup,
    UpdateGroupStatus,
    UpdateOwned,
)
from tfjob.core.trainjob.plan import FIELD_MANAGER, ApplyObject, CreateObject, TrainJobAction
from tfjob.frameworks.framework import Framework
from tfjob.runtimes.kubernetes.cache.consistency import JobView
from tfjob.runtimes.kubernetes.cache.shared import group_resource
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.owned_objects import OwnedObjects
from tfjob.runtimes.kubernetes.transport.client import (
    ApiError,
    KubeClient,
    RequestTimeout,
    TransportError,
)
from tfjob.runtimes.kubernetes.transport.decode import resource_version_of
from tfjob.runtimes.kubernetes.transport.resources import (
    PODS,
    SERVICES,
    Resource,
    jobs_of,
    resource_of,
)


class Verb(enum.Enum):
    CREATE = "Create"
    REPLACE = "Replace"
    PATCH = "Patch"  # a JSON merge patch
    APPLY = "Apply"  # a server-side apply (field manager `trainer`, forced)
    DELETE = "Delete"

    @property
    def reported(self) -> bool:
        """Whether its success and failure are Events (creates and deletes only)."""
        return self in (Verb.CREATE, Verb.DELETE)


class WriteLog(Protocol):
    """A view that notes our writes (JobView, a TrainJob's TrainJobView): the hold."""

    def wrote(self, resource: Resource, resource_version: str) -> None: ...


Count = Callable[[], None]
OnExists = Callable[[JobView, ObjectRef], Awaitable[Exception | None]]


@dataclass(frozen=True)
class Write:
    """One API write and how it is reported."""

    verb: Verb
    resource: Resource
    name: str
    noun: str  # in Event reasons: "Pod", "Service", "PodGroup", "ConfigMap", "Job"
    manifest: Callable[[], dict[str, Any]] | None = None  # rendered as it is sent; a patch's
    said: str = ""  # in Event messages: "pod", "service", "PodGroup", "job"
    announces: bool = True  # a Successful<Verb><Noun> Event on success
    on_exists: OnExists | None = None  # a create's AlreadyExists, when not simply done
    counted: Count | None = None  # on success
    failed: Count | None = None  # on failure
    subresource: str = ""  # "status": a replace of the status subresource
    uid: str = ""  # a delete's precondition: only the object of this uid, the one seen


class Writer:
    """Sends one kind's writes (`apply`): the policy of the module docstring."""

    def __init__(
        self,
        kind: Framework[Any] | None,
        client: KubeClient,
        recorder: EventRecorder,
        metrics: Metrics,
        writes: ReconcileWrites,
    ) -> None:
        self._kind = kind  # None: the TrainJob controller's (write_of_trainjob only)
        self._client = client
        self._recorder = recorder
        self._metrics = metrics
        self._writes = writes  # Events yield to the writes marked here
        self._owned = OwnedObjects(client, recorder)

    async def apply(self, view: WriteLog, ref: ObjectRef, write: Write) -> Exception | None:
        """Send `write`; None when done (or possibly done), else the error."""
        with self._writes.acting():
            try:
                raw = await self._send(ref.namespace, write)
            except ApiError as error:
                if write.verb is Verb.CREATE and error.already_exists:
                    if write.on_exists is None:
                        return None
                    assert isinstance(view, JobView), "only a v1 job's objects are taken over"
                    return await write.on_exists(view, ref)
                return self._failed(ref, write, error)
            except RequestTimeout:
                return None  # it may have gone through; the watch will tell
            except TransportError as error:
                return self._failed(ref, write, error)
        if raw is not None:
            view.wrote(write.resource, resource_version_of(raw))
        if write.announces and write.verb.reported:
            verb = write.verb.value
            message = f"{verb}d {write.said or write.noun}: {write.name}"
            self._recorder.record(ref, "Normal", f"Successful{verb}{write.noun}", message)
        if write.counted is not None:
            write.counted()
        return None

    async def _send(self, namespace: str, write: Write) -> bytes | None:
        if write.verb is Verb.DELETE:
            return await self._client.delete(write.resource, namespace, write.name, uid=write.uid)
        assert write.manifest is not None, "a create or replace sends a manifest"
        resource, name, body = write.resource, write.name, write.manifest()
        if write.verb is Verb.CREATE:
            return await self._client.create(resource, namespace, body)
        if write.verb is Verb.PATCH:
            return await self._client.merge_patch(resource, namespace, name, body)
        if write.verb is Verb.APPLY:
            return await self._client.apply(
                resource, namespace, name, body, field_manager=FIELD_MANAGER, force=True
            )
        if write.subresource == "status":
            return await self._client.replace_status(resource, namespace, name, body)
        return await self._client.replace(resource, namespace, name, body)

    def _failed(self, ref: ObjectRef, write: Write, error: Exception) -> Exception:
        if write.verb.reported:
            verb = write.verb.value
            doing = "creating" if write.verb is Verb.CREATE else "deleting"
            self._recorder.record(
                ref, "Warning", f"Failed{verb}{write.noun}", f"Error {doing}: {error}"
            )
        if write.failed is not None:
            write.failed()
        return error

    # -- actions to writes ------------------------------------------------------------

    def write_of(self, action: Action, ref: ObjectRef, pods: PodRenderer | None = None) -> Write:
        """The write that carries out `action` (rendering a pod only as it is sent:
        `pods`, which a plan that creates pods has)."""
        m = self._metrics
        if isinstance(action, CreatePod):
            assert pods is not None, "a pod is rendered by the plan's PodRenderer"
            return Write(
                Verb.CREATE,
                PODS,
                action.name,
                "Pod",
                lambda: pods.manifest(action),
                "pod",
                counted=m.created_pods.inc,
            )
        if isinstance(action, DeletePod):
            return Write(
                Verb.DELETE,
                PODS,
                action.name,
                "Pod",
                said="pod",
                counted=m.deleted_pods.inc,
                uid=action.uid,
            )
        if isinstance(action, CreateService):
            manifest = action.manifest
            return Write(
                Verb.CREATE,
                SERVICES,
                action.name,
                "Service",
                lambda: manifest,
                "service",
                counted=m.services_created.inc,
                failed=m.services_failed.inc,
            )
        if isinstance(action, DeleteService):
            return Write(Verb.DELETE, SERVICES, action.name, "Service", said="service")
        if isinstance(action, DeleteJob):
            assert self._kind is not None, "a v1 kind's writer"
            return Write(
                Verb.DELETE,
                jobs_of(self._kind),
                ref.name,
                "Job",
                said="job",  # counted when the cache shows it gone (lifecycle.py)
            )
        if isinstance(action, CreateGroup | UpdateGroup | UpdateGroupStatus | DeleteGroup):
            return self._group_write(action)
        if isinstance(action, CreateOwned | UpdateOwned | DeleteOwned):
            return self._owned_write(action)
        return self._suspend_write(action, ref)

    def write_of_trainjob(self, action: TrainJobAction) -> Write:
        """The write that carries out a TrainJob plan's action: applied, created (the
        MPI Secret: one that exists is kept) or deleted (the JobSet past the deadline);
        no Event, as Trainer records none for them."""
        resource, noun = resource_of(action.kind), action.kind.kind
        if isinstance(action, DeleteOwned):
            return Write(Verb.DELETE, resource, action.name, noun, announces=False)
        manifest = action.manifest
        verb = Verb.APPLY if isinstance(action, ApplyObject) else Verb.CREATE
        assert isinstance(action, ApplyObject | CreateObject)
        return Write(verb, resource, action.name, noun, lambda: manifest, announces=False)

    def _suspend_write(self, action: SetSuspend, ref: ObjectRef) -> Write:
        """A queued job's `spec.runPolicy.suspend` (core/queued.py), patched only on
        the job as read: its resourceVersion in the patch makes it conditional."""
        assert self._kind is not None, "a v1 kind's writer"
        patch = {
            "metadata": {"resourceVersion": ref.resource_version},
            "spec": {"runPolicy": {"suspend": action.value}},
        }
        return Write(Verb.PATCH, jobs_of(self._kind), ref.name, "Job", lambda: patch, "job")

    def _group_write(
        self, action: CreateGroup | UpdateGroup | UpdateGroupStatus | DeleteGroup
    ) -> Write:
        resource, noun, m = group_resource(action.kind), action.kind.kind, self._metrics
        podgroup = noun == "PodGroup"  # upstream's counters (a native Workload is not counted)
        if isinstance(action, DeleteGroup):
            counted = m.pod_groups_deleted.inc if podgroup else None
            return Write(Verb.DELETE, resource, action.name, noun, counted=counted)
        manifest = action.manifest
        if isinstance(action, UpdateGroup):
            return Write(Verb.REPLACE, resource, action.name, noun, lambda: manifest)
        if isinstance(action, UpdateGroupStatus):
            return Write(
                Verb.REPLACE, resource, action.name, noun, lambda: manifest, subresource="status"
            )
        counted = m.pod_groups_created.inc if podgroup else None
        return Write(Verb.CREATE, resource, action.name, noun, lambda: manifest, counted=counted)

    def _owned_write(self, action: CreateOwned | UpdateOwned | DeleteOwned) -> Write:
        # Upstream records no Event for the objects made beside pods and services.
        resource, noun = resource_of(action.kind), action.kind.kind
        if isinstance(action, DeleteOwned):
            return Write(Verb.DELETE, resource, action.name, noun, announces=False)
        manifest = action.manifest
        if isinstance(action, UpdateOwned):
            return Write(Verb.REPLACE, resource, action.name, noun, lambda: manifest)

        async def take_over(view: JobView, ref: ObjectRef) -> Exception | None:
            return await self._owned.take_over(view, ref, action)

        return Write(
            Verb.CREATE,
            resource,
            action.name,
            noun,
            lambda: manifest,
            announces=False,
            on_exists=take_over,
        )
