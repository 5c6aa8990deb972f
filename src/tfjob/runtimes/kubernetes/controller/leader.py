"""Leader election on a coordination.k8s.io/v1 Lease (client-go's algorithm).

Why: two operator replicas reconciling the same jobs would race each other's
creates and status writes. Only the holder of the Lease runs workers.

As client-go: a Lease held by someone else counts as expired only when it has not
changed for `lease_duration` by *our* clock (we never compare our clock with the
holder's timestamps, so clock skew cannot make two leaders). The leader renews every
`retry_period`; if it cannot renew within `renew_deadline` it has lost the lease and
the operator stops (another replica takes over), the same as client-go's exit.
On a clean shutdown the lease is released so the next leader need not wait.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog

from tfjob.api.errors import PermanentError
from tfjob.api.timestamps import rfc3339_micro
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import LEASES

log = structlog.get_logger("tfjob.leader")


class LeadershipLost(PermanentError):
    """The lease could not be renewed in time."""


class LeaseSpec(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0


class _LeaseMeta(msgspec.Struct, rename="camel", kw_only=True):
    resource_version: str = ""


class Lease(msgspec.Struct, kw_only=True):
    metadata: _LeaseMeta = msgspec.field(default_factory=_LeaseMeta)
    spec: LeaseSpec = msgspec.field(default_factory=LeaseSpec)


@dataclass(frozen=True)
class LeaderConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaderConfig,
        clock: Callable[[], float] = time.monotonic,
        on_status: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        self._client = client
        self._config = config
        self._clock = clock
        self._on_status = on_status  # the leader_election_master_status gauge
        self._observed: LeaseSpec | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0  # when our last renewal was written, by our clock
        self._version = ""
        self._is_leader = False

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @is_leader.setter
    def is_leader(self, leading: bool) -> None:
        self._is_leader = leading
        self._on_status(leading)

    async def acquire(self) -> None:
        """Return once this instance holds the lease."""
        log.info("waiting for leadership", lease=self._lease_name, identity=self._config.identity)
        while True:
            if await self._try():
                break
            await asyncio.sleep(self._config.retry_period * (1 + 0.2 * random.random()))
        log.info("became leader", lease=self._lease_name)

    async def hold(self) -> None:
        """Renew forever; raise LeadershipLost when renewal fails for too long, or at
        once when the Lease is seen held by someone else.

        The deadline runs from the last renewal, not from the attempt: a process
        that was stopped (frozen, swapped out, cut off) past it gets one attempt, which
        keeps the Lease only if no one took it meanwhile. (better) client-go keeps
        retrying a Lease it sees another holder renewing until its renew deadline,
        acting as leader all that while: two leaders at once."""
        while True:
            await asyncio.sleep(self._config.retry_period)
            while not await self._try():
                if not self.is_leader:
                    raise LeadershipLost(
                        f"lease {self._lease_name} is held by {self._observed_holder()}"
                    )
                if self._clock() >= self._renewed_at + self._config.renew_deadline:
                    self.is_leader = False
                    raise LeadershipLost(f"could not renew lease {self._lease_name}")
                await asyncio.sleep(self._config.retry_period / 4)

    def _observed_holder(self) -> str:
        return self._observed.holder_identity if self._observed is not None else ""

    async def release(self) -> None:
        """Give the lease up (best effort) so a successor need not wait it out.

        A renewal cancelled on the way out (SIGTERM) may have reached the API server
        without our seeing its answer: the version we hold is then stale and the PUT
        meets 409. The Lease is read again and, still ours, released at its version,
        or a rolling update's new pod would wait out the whole lease duration."""
        if not self.is_leader or self._observed is None:
            return
        try:
            if not await self._put(self._released(self._observed)):
                await self._release_current()
        except (ApiError, TransportError) as error:
            log.warning("could not release lease", error=str(error))
        self.is_leader = False

    async def _release_current(self) -> None:
        config = self._config
        raw = await self._client.get(LEASES, config.namespace, config.name)
        lease = msgspec.json.decode(raw, type=Lease)
        if lease.spec.holder_identity == config.identity:
            self._version = lease.metadata.resource_version
            await self._put(self._released(lease.spec))

    @staticmethod
    def _released(spec: LeaseSpec) -> LeaseSpec:
        """The lease as a released one is written (client-go's): no holder, 1 s left."""
        return msgspec.structs.replace(
            spec,
            holder_identity="",
            lease_duration_seconds=1,
            renew_time=rfc3339_micro(datetime.now(UTC)),
        )

    @property
    def _lease_name(self) -> str:
        return f"{self._config.namespace}/{self._config.name}"

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; False if someone else holds it (or an error)."""
        try:
            return await self._attempt()
        except (ApiError, TransportError) as error:
            log.warning("lease attempt failed", error=str(error))
            return False

    async def _attempt(self) -> bool:
        config = self._config
        try:
            raw = await self._client.get(LEASES, config.namespace, config.name)
        except ApiError as error:
            if not error.not_found:
                raise
            return await self._create()
        lease = msgspec.json.decode(raw, type=Lease)
        self._version = lease.metadata.resource_version
        if lease.spec != self._observed:
            self._observed, self._observed_at = lease.spec, self._clock()
        holder = lease.spec.holder_identity
        duration = lease.spec.lease_duration_seconds or config.lease_duration
        if holder and holder != config.identity and self._clock() < self._observed_at + duration:
            self.is_leader = False
            return False
        now = rfc3339_micro(datetime.now(UTC))
        spec = msgspec.structs.replace(
            lease.spec,
            holder_identity=config.identity,
            lease_duration_seconds=int(config.lease_duration),
            renew_time=now,
        )
        if holder != config.identity:
            spec = msgspec.structs.replace(
                spec, acquire_time=now, lease_transitions=lease.spec.lease_transitions + 1
            )
        return await self._put(spec)

    async def _create(self) -> bool:
        now = rfc3339_micro(datetime.now(UTC))
        spec = LeaseSpec(
            holder_identity=self._config.identity,
            lease_duration_seconds=int(self._config.lease_duration),
            acquire_time=now,
            renew_time=now,
        )
        return await self._write(spec, create=True)

    async def _put(self, spec: LeaseSpec) -> bool:
        return await self._write(spec, create=False)

    async def _write(self, spec: LeaseSpec, *, create: bool) -> bool:
        """Create the Lease or replace it at the version we last saw; False if someone
        else got there first (409), which is how candidates lose a race."""
        metadata: dict[str, Any] = {"name": self._config.name, "namespace": self._config.namespace}
        if not create:
            metadata["resourceVersion"] = self._version
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": msgspec.to_builtins(spec),
        }
        namespace = self._config.namespace
        try:
            if create:
                raw = await self._client.create(LEASES, namespace, body)
            else:
                raw = await self._client.replace(LEASES, namespace, self._config.name, body)
        except ApiError as error:
            if error.code == 409:
                return False
            raise
        self._remember(raw)
        return True

    def _remember(self, raw: bytes) -> None:
        lease = msgspec.json.decode(raw, type=Lease)
        self._version = lease.metadata.resource_version
        self._observed, self._observed_at = lease.spec, self._clock()
        self.is_leader = lease.spec.holder_identity == self._config.identity
        if self.is_leader:
            self._renewed_at = self._observed_at
