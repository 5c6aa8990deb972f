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

Accepted verdicts are shared between jobs for VERDICT_TTL (60 s): 200 jobs submitted
from one template would otherwise send 400 dry runs on the reconciles' request budget
before their first pods. A sample's verdict is reused for another job's sample that is
the same byte for byte except for the job's name and uid, where the two names have the
same length and the same character class at each position (lower-case letter, digit,
`-`, `.`). Why that is safe for the API server's own checks: every value derived from
the name (pod and service names, hostnames, labels, TF_CONFIG's addresses) is checked
by length limits and by patterns over exactly those classes (DNS-1123/1035 names,
label values), so two such names pass or fail the same checks; the uid is only copied
into owner references, which are not checked for form. An admission policy could still
single out one name; the 60 s bound is how long such a policy change (or any other)
may go unseen, and a pod create it refuses is then reported and not retried
(reconciler.py). A refusal is never shared: each job asks for its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from tfjob.api.types import ObjectMeta
from tfjob.core.objects import PodRenderer
from tfjob.core.plan import Action, CreatePod, CreateService
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import PODS, SERVICES

VERDICT_TTL = 60.0  # seconds an accepted sample stands for others of its shape
VERDICT_LIMIT = 4096  # accepted samples remembered (oldest forgotten first)
# A name's characters by class; the bytes are control characters, which encoded JSON
# never holds raw, so a placeholder cannot be mistaken for anything in the sample.
_CLASSES = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyz0123456789-.", b"\x01" * 26 + b"\x02" * 10 + b"\x03\x04"
)
_UID = b"\x05"


class DryRun:
    """The first-pods check of each job, remembered per job uid; accepted samples
    shared between jobs of the same shape for VERDICT_TTL."""

    def __init__(
        self,
        client: KubeClient,
        *,
        limit: int = 100_000,
        ttl: float = VERDICT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._admitted: dict[str, None] = {}  # insertion-ordered set of job uids
        self._limit = limit
        self._accepted: dict[bytes, float] = {}  # sample shape -> accepted until
        self._ttl = ttl
        self._clock = clock

    def needed(self, uid: str, has_pods: bool, actions: Sequence[Action]) -> bool:
        """Whether this plan creates a job's first pods and the job is not checked yet."""
        creates_pods = any(isinstance(a, CreatePod) for a in actions)
        return creates_pods and not has_pods and uid not in self._admitted

    async def refusal(
        self, job: ObjectMeta, actions: Sequence[Action], pods: PodRenderer
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
            shape = _shape(job, resource.plural, manifest)
            if self._still_accepted(shape):
                continue
            try:
                await self._client.create(resource, job.namespace, manifest, dry_run=True)
            except ApiError as error:
                if error.already_exists:
                    continue  # fixed names: one is there already, so its kind is fine
                if error.refused:
                    return error.message
                raise
            self._accept(shape)
        self._remember(job.uid)
        return None

    def _remember(self, uid: str) -> None:
        self._admitted[uid] = None
        if len(self._admitted) > self._limit:
            del self._admitted[next(iter(self._admitted))]

    def _still_accepted(self, shape: bytes) -> bool:
        until = self._accepted.get(shape)
        if until is None:
            return False
        if self._clock() < until:
            return True
        del self._accepted[shape]
        return False

    def _accept(self, shape: bytes) -> None:
        self._accepted.pop(shape, None)  # re-inserted last: the dict stays oldest first
        self._accepted[shape] = self._clock() + self._ttl
        if len(self._accepted) > VERDICT_LIMIT:
            del self._accepted[next(iter(self._accepted))]


def _shape(job: ObjectMeta, plural: str, manifest: dict[str, Any]) -> bytes:
    """The sample with the job's uid and name replaced by same-length placeholders
    (the name's by character class), prefixed with what else must match: namespace,
    kind, the uid's length and the name's placeholder. Equal shapes are samples equal
    but for names of one class pattern (module docstring: why their verdicts agree)."""
    body = msgspec.json.encode(manifest)
    uid, name = job.uid.encode(), job.name.encode()
    placeholder = name.translate(_CLASSES)
    if uid:
        body = body.replace(uid, _UID * len(uid))
    body = body.replace(name, placeholder)
    return f"{job.namespace}/{plural}/{len(uid)}/".encode() + placeholder + b"\n" + body


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
