"""Writing the objects a job owns besides pods and services (core/owned.py decides).

The kinds that own any (an MPIJob's ServiceAccount, Role, RoleBinding and ConfigMap,
a PyTorchJob's HorizontalPodAutoscaler) are watched by informers of their own
(controller.py), so a job's view holds them; this module carries out the plan's
CreateOwned, UpdateOwned (a conditional PUT) and DeleteOwned, and notes each answer's
resourceVersion on the view, so the job is held until the caches show it
(consistency.py).

One case the caches cannot show: an object of the wanted name that is not labelled
for the operator (made by Kubeflow's operator before a swap, or by someone else).
The create answers AlreadyExists; the object is then read: if the job controls it,
it is taken over, labelled and given the owned fields in one PUT (from then on the
caches show it); if not, it is a conflict (Kubeflow's `ErrResourceExists` Event),
retried with backoff, unless its kind accepts a foreign object (a launcher's
ServiceAccount named in the template may be the user's).
"""

from __future__ import annotations

import msgspec

from tfjob.api.errors import TemporaryError
from tfjob.api.observed import OwnedObject
from tfjob.core.owned import updated_object
from tfjob.core.plan import CreateOwned, DeleteOwned, UpdateOwned
from tfjob.runtimes.kubernetes.cache.consistency import JobView
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.transport.client import (
    ApiError,
    KubeClient,
    RequestTimeout,
    TransportError,
)
from tfjob.runtimes.kubernetes.transport.decode import resource_version_of
from tfjob.runtimes.kubernetes.transport.resources import resource_of

RESOURCE_EXISTS = "ErrResourceExists"  # upstream's Event reason


class OwnedConflict(TemporaryError):
    """An object of a wanted name exists and is not the job's."""


class OwnedObjects:
    """The API side of the objects jobs own besides pods and services."""

    def __init__(self, client: KubeClient, recorder: EventRecorder) -> None:
        self._client = client
        self._recorder = recorder

    async def act(
        self, view: JobView, ref: ObjectRef, action: CreateOwned | UpdateOwned | DeleteOwned
    ) -> Exception | None:
        """Carry out one action; the error (a failed create or delete is also an
        Event) or None."""
        resource = resource_of(action.kind)
        noun = action.kind.kind
        try:
            if isinstance(action, CreateOwned):
                try:
                    raw = await self._client.create(resource, ref.namespace, action.manifest)
                except ApiError as error:
                    if not error.already_exists:
                        raise
                    return await self._take_over(view, ref, action)
            elif isinstance(action, UpdateOwned):
                raw = await self._client.replace(
                    resource, ref.namespace, action.name, action.manifest
                )
            else:
                deleted = await self._client.delete(resource, ref.namespace, action.name)
                raw = deleted or b"{}"
        except RequestTimeout:
            return None  # it may have gone through; the watch will tell
        except (ApiError, TransportError) as error:
            if not isinstance(action, UpdateOwned):  # a 409 on an update is routine
                verb, doing = (
                    ("Create", "creating")
                    if isinstance(action, CreateOwned)
                    else ("Delete", "deleting")
                )
                self._recorder.record(
                    ref, "Warning", f"Failed{verb}{noun}", f"Error {doing}: {error}"
                )
            return error
        view.wrote(resource, resource_version_of(raw))
        return None

    async def _take_over(
        self, view: JobView, ref: ObjectRef, action: CreateOwned
    ) -> Exception | None:
        """An object of the wanted name exists but the caches do not show it."""
        resource = resource_of(action.kind)
        raw = await self._client.get(resource, ref.namespace, action.name)
        found = OwnedObject.of(msgspec.json.decode(raw))
        if found.metadata.controller_uid() != ref.uid:
            if action.kind.foreign_accepted:
                return None
            message = (
                f'Resource "{action.name}" of kind "{action.kind.kind}" already exists '
                f"and is not managed by {ref.kind}"
            )
            self._recorder.record(ref, "Warning", RESOURCE_EXISTS, message)
            return OwnedConflict(message)
        updated = updated_object(action.kind, found, action.manifest)
        if updated is None:
            return None
        raw = await self._client.replace(resource, ref.namespace, action.name, updated)
        view.wrote(resource, resource_version_of(raw))
        return None
