"""Taking over an owned object the caches cannot show (core/owned.py decides the rest).

The objects a job owns besides pods and services (an MPIJob's ServiceAccount, Role,
RoleBinding and ConfigMap, a PyTorchJob's HorizontalPodAutoscaler) are read from the
shared caches, labelled for the operator, and written through the one write path
(writes.py) like pods. One case the caches cannot show: an object of the wanted name
that is not labelled for the operator (made by Kubeflow's operator before a swap, or
by someone else). The create answers AlreadyExists, and `take_over` reads it: if the
job controls it, it is taken over, labelled and given the owned fields in one PUT
(from then on the caches show it); if not, it is a conflict (Kubeflow's
`ErrResourceExists` Event), retried with backoff, unless its kind accepts a foreign
object (a launcher's ServiceAccount named in the template may be the user's).
"""

from __future__ import annotations

import msgspec

from tfjob.api.errors import TemporaryError
from tfjob.api.observed import OwnedObject
from tfjob.core.owned import updated_object
from tfjob.core.plan import CreateOwned
from tfjob.runtimes.kubernetes.cache.consistency import JobView
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.decode import resource_version_of
from tfjob.runtimes.kubernetes.transport.resources import resource_of

RESOURCE_EXISTS = "ErrResourceExists"  # upstream's Event reason


class OwnedConflict(TemporaryError):
    """An object of a wanted name exists and is not the job's."""


class OwnedObjects:
    """The take-over of owned objects made before the operator labelled them."""

    def __init__(self, client: KubeClient, recorder: EventRecorder) -> None:
        self._client = client
        self._recorder = recorder

    async def take_over(
        self, view: JobView, ref: ObjectRef, action: CreateOwned
    ) -> Exception | None:
        """An object of the wanted name exists but the caches do not show it."""
        resource = resource_of(action.kind)
        try:
            raw = await self._client.get(resource, ref.namespace, action.name)
            found = OwnedObject.of(msgspec.json.decode(raw))
            if found.metadata.controller_uid() != ref.uid:
                return None if action.kind.foreign_accepted else self._conflict(ref, action)
            updated = updated_object(action.kind, found, action.manifest)
            if updated is None:
                return None
            raw = await self._client.replace(resource, ref.namespace, action.name, updated)
        except (ApiError, TransportError) as error:
            return error
        view.wrote(resource, resource_version_of(raw))
        return None

    def _conflict(self, ref: ObjectRef, action: CreateOwned) -> OwnedConflict:
        message = (
            f'Resource "{action.name}" of kind "{action.kind.kind}" already exists '
            f"and is not managed by {ref.kind}"
        )
        self._recorder.record(ref, "Warning", RESOURCE_EXISTS, message)
        return OwnedConflict(message)
