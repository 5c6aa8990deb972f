"""A standby replica is ready, and takes over (controller/operator.py `ready`, leader.py).

Two operators with leader election run in-process on one in-memory API
(testkit/fake_api.py), each with its real health endpoint on a port of its own. The
one waiting for the Lease answers /readyz 200 (as controller-runtime's managers do),
so a rolling update's new pod becomes Ready while the old one still leads; it lists,
watches and reconciles nothing until it holds the Lease. It takes the Lease over at
once when the holder releases it, and within the lease duration when the holder died
(a Lease left unrenewed). The leader answers 200 only once its caches are synced.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import tfjob, until
from testkit.operators import replica
from tfjob.api.timestamps import rfc3339_micro
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller.leader import LeaderConfig
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.transport.http1 import Origin, Pool
from tfjob.runtimes.kubernetes.transport.resources import LEASES, PODS, jobs_of

TFJOBS = jobs_of(TENSORFLOW)

NS = "default"
LEASE = "tfjob-operator"
OPTIONS = OperatorOptions(
    namespace=NS,
    metrics_port=-1,
    health_port=0,  # a free port each
    bind_host="127.0.0.1",
    leader_elect=True,
    lease_namespace=NS,
    lease_name=LEASE,
    workers=1,
)
#: The standby's longest wait between two looks at the Lease (retry period + jitter).
RETRY = LeaderConfig(namespace=NS, name=LEASE, identity="").retry_period * 1.2


class Replica:
    """One operator replica running on its own task until `stop`."""

    def __init__(self, api: FakeApi) -> None:
        self.operator = Operator(OPTIONS, api.client())  # type: ignore[arg-type]
        self._stop = asyncio.Event()
        self.task = asyncio.create_task(self.operator.run(self._stop))

    async def readyz(self) -> int:
        """/readyz's status code over HTTP, as the kubelet's probe sees it (0: not up)."""
        addresses = self.operator.servers.addresses()
        if not addresses:
            return 0
        pool = Pool()
        try:
            status, _ = await pool.fetch("GET", Origin.parse(addresses[0]), "/readyz", {})
        finally:
            await pool.close()
        return status

    async def wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while await self.readyz() != 200:
            assert not self.task.done(), f"the replica exited {self.task.result()}"
            assert loop.time() < deadline, "/readyz not 200 within 10 s"
            await asyncio.sleep(0.02)

    @property
    def leads(self) -> bool:
        elector = self.operator.elector
        return elector is not None and elector.is_leader

    def created_pods(self) -> float:
        value = self.operator.metrics.registry.get_sample_value("created_pods_total")
        return value or 0.0

    async def stop(self) -> int:
        self._stop.set()
        return await asyncio.wait_for(self.task, 30)


@pytest.fixture
async def replicas(api: FakeApi) -> AsyncIterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for each in started:
        if not each.task.done():
            await each.stop()


def _pod_creates(api: FakeApi) -> list[str]:
    """The pods created, by name (not the dry runs that admit a job's first pod)."""
    return [r.name for r in api.of("create", PODS) if not r.dry_run]


def _holder(api: FakeApi) -> str:
    lease = api.object(LEASES, NS, LEASE)
    assert lease is not None
    holder: str = lease["spec"].get("holderIdentity", "")
    return holder


async def test_a_standby_is_ready_reconciles_nothing_and_takes_over_a_released_lease(
    api: FakeApi, replicas: list[Replica]
) -> None:
    leader = Replica(api)
    replicas.append(leader)
    await leader.wait_ready()
    assert leader.leads and leader.operator.synced()

    standby = Replica(api)
    replicas.append(standby)
    await standby.wait_ready()  # Ready while the other holds the Lease
    await api.client().create(TFJOBS, NS, tfjob("one", NS, {"Worker": replica(2)}))
    await until(lambda: len(api.objects(PODS, NS)) == 2)
    await asyncio.sleep(2 * RETRY)  # the standby looked at the Lease again meanwhile
    assert await standby.readyz() == 200
    assert not standby.leads and not standby.operator.synced()  # no caches at all
    assert standby.created_pods() == 0 and leader.created_pods() == 2
    assert len(_pod_creates(api)) == 2  # no second reconciler racing the first

    assert await leader.stop() == 0  # SIGTERM: releases the Lease on the way out
    assert _holder(api) == ""
    loop = asyncio.get_running_loop()
    released = loop.time()
    await until(lambda: standby.leads, within=RETRY + 1)  # no wait for the lease duration
    assert loop.time() - released <= RETRY + 1
    await until(standby.operator.synced)
    assert await standby.readyz() == 200
    await api.client().create(TFJOBS, NS, tfjob("two", NS, {"Worker": replica(1)}))
    await until(lambda: len(api.objects(PODS, NS)) == 3)
    assert standby.created_pods() == 1  # the new leader's work, none of the old job's
    assert len(_pod_creates(api)) == 3


async def test_a_standby_takes_over_from_a_dead_holder_within_the_lease_duration(
    api: FakeApi, replicas: list[Replica]
) -> None:
    """A holder that died (SIGKILL: no release) leaves its Lease as it last renewed it;
    the standby waits that Lease's own duration (3 s here), by its own clock."""
    now = rfc3339_micro(datetime.now(UTC))
    spec = {"holderIdentity": "dead", "leaseDurationSeconds": 3, "renewTime": now}
    await api.client().create(LEASES, NS, {"metadata": {"name": LEASE}, "spec": spec})
    await api.client().create(TFJOBS, NS, tfjob("left", NS, {"Worker": replica(1)}))

    standby = Replica(api)
    replicas.append(standby)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await standby.wait_ready()
    assert not standby.leads and api.objects(PODS, NS) == []
    await until(lambda: standby.leads, within=3 + 2 * RETRY)
    waited = loop.time() - started
    assert 3 <= waited <= 3 + 2 * RETRY  # the whole lease duration, and not much more
    assert _holder(api) not in ("", "dead")
    await until(lambda: len(api.objects(PODS, NS)) == 1)  # the dead holder's job goes on
    assert await standby.readyz() == 200


async def test_the_leader_is_not_ready_until_its_caches_are_synced(
    api: FakeApi, replicas: list[Replica]
) -> None:
    """Readiness after the Lease still means "caches synced": a leader whose pod list
    fails answers 503 (its health endpoint still answers), and 200 once it lists."""
    api.fail(503, verb="list", resource=PODS)  # retried after 0.8-1.6 s
    leader = Replica(api)
    replicas.append(leader)
    await until(lambda: leader.leads and any(r.error for r in api.of("list", PODS)))
    assert not leader.operator.synced()
    assert await leader.readyz() == 503
    await leader.wait_ready()
    assert leader.operator.synced()
