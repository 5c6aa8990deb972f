"""Ask the API server whether a job's pods and services would be accepted, before
creating any.

The CRD's schema and rules refuse most bad TFJobs when they are created, but some
problems only show when a pod is validated (a port out of range, a bad volume, an
admission policy of the cluster). Without this check such a job would sit in Created
forever while every pod create fails. So before a job's first pods are created, one
pod and one service per replica type are sent with a server-side dry run
(`?dryRun=All`: validated and admitted, never stored). A permanent refusal (400 or
422) is returned as the API server's own message, for the job to be marked Failed;
any other error is raised, so the job is retried with backoff.

A job is checked once per operator process (remembered by uid), and only while it has
no pods: a job that already has pods was admitted before.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfjob.core.objects import PodRenderer
from tfjob.core.plan import Action, CreatePod, CreateService
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.resources import PODS, SERVICES

_PERMANENT = (400, 422)


class DryRun:
    """The first-pods check of each job, remembered per job uid."""

    def __init__(self, client: KubeClient, *, limit: int = 100_000) -> None:
        self._client = client
        self._admitted: dict[str, None] = {}  # insertion-ordered set of job uids
        self._limit = limit

    def needed(self, uid: str, has_pods: bool, actions: Sequence[Action]) -> bool:
        """Whether this plan creates a job's first pods and the job is not checked yet."""
        creates_pods = any(isinstance(a, CreatePod) for a in actions)
        return creates_pods and not has_pods and uid not in self._admitted

    async def refusal(
        self, uid: str, namespace: str, actions: Sequence[Action], pods: PodRenderer
    ) -> str | None:
        """None if every sample is accepted; else what the API server said.

        Raises ApiError (other than 400/422) or TransportError for a retry, and
        whatever rendering a manifest raises (a spec the core cannot read).
        """
        for action in _samples(actions):
            if isinstance(action, CreatePod):
                resource, manifest = PODS, pods.manifest(action)
            else:
                resource, manifest = SERVICES, action.manifest
            try:
                await self._client.create(resource, namespace, manifest, dry_run=True)
            except ApiError as error:
                if error.already_exists:
                    continue  # fixed names: one is there already, so its kind is fine
                if error.code in _PERMANENT:
                    return error.message
                raise
        self._remember(uid)
        return None

    def forget(self, uid: str) -> None:
        self._admitted.pop(uid, None)

    def _remember(self, uid: str) -> None:
        self._admitted[uid] = None
        if len(self._admitted) > self._limit:
            del self._admitted[next(iter(self._admitted))]


def _samples(actions: Sequence[Action]) -> list[CreatePod | CreateService]:
    """The first pod and the first service create of each replica type."""
    seen: set[tuple[type, str]] = set()
    samples: list[CreatePod | CreateService] = []
    for action in actions:
        if not isinstance(action, CreatePod | CreateService):
            continue
        key = (type(action), action.replica_type)
        if key not in seen:
            seen.add(key)
            samples.append(action)
    return samples
