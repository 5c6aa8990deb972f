"""Leader election on a Lease (runtimes/kubernetes/controller/leader.py), on the in-memory API
(testkit/fake_api.py): its 409s on a create race and on a stale PUT are the real API
server's (tests/kubernetes/test_fake_api_parity.py). One operator replica holds the
Lease; another takes it only once it has gone unrenewed for the lease duration by
its own clock, or at once when released; a leader that cannot renew in time stops."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import until
from tfjob.runtimes.kubernetes.controller.leader import LeaderConfig, LeaderElector, LeadershipLost
from tfjob.runtimes.kubernetes.transport.resources import LEASES

NS = "default"


class Clock:
    """A clock the test moves (the elector reads no other)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(api: FakeApi, identity: str, clock: Clock, **timing: float) -> LeaderElector:
    config = LeaderConfig(namespace=NS, name="tfjob-operator", identity=identity, **timing)
    return LeaderElector(api.client(), config, clock=clock)  # type: ignore[arg-type]


def _lease(api: FakeApi) -> dict[str, Any]:
    lease = api.object(LEASES, NS, "tfjob-operator")
    assert lease is not None
    spec: dict[str, Any] = lease["spec"]
    return spec


async def test_of_two_candidates_starting_together_one_leads(api: FakeApi) -> None:
    clock = Clock()
    one, two = _elector(api, "one", clock), _elector(api, "two", clock)
    won = await asyncio.gather(one._try(), two._try())
    assert sorted(won) == [False, True]  # the second create met AlreadyExists
    leader = one if won[0] else two
    assert leader.is_leader and not (two if won[0] else one).is_leader
    assert _lease(api)["holderIdentity"] == ("one" if won[0] else "two")
    assert [r.error is not None for r in api.of("create", LEASES)] == [False, True]


async def test_a_held_lease_is_taken_only_after_it_went_unrenewed_for_its_duration(
    api: FakeApi,
) -> None:
    clock = Clock()
    holder, waiting = _elector(api, "one", clock), _elector(api, "two", clock)
    assert await holder._try()
    assert not await waiting._try()  # first sight of the lease: the clock starts now
    clock.now += 14
    assert not await waiting._try()
    assert await holder._try()  # renewed
    clock.now += 14
    assert not await waiting._try()  # sees the renewal: counts again from now
    clock.now += 14
    assert not await waiting._try()
    clock.now += 2  # 16 s since it last saw the lease change, by its own clock
    assert await waiting._try()
    spec = _lease(api)
    assert spec["holderIdentity"] == "two" and spec["leaseTransitions"] == 1
    assert not await holder._try()  # the old leader sees it lost the lease


async def test_a_released_lease_is_taken_at_once(api: FakeApi) -> None:
    clock = Clock()
    holder, waiting = _elector(api, "one", clock), _elector(api, "two", clock)
    assert await holder._try()
    assert not await waiting._try()
    await holder.release()
    assert not holder.is_leader and "holderIdentity" not in _lease(api)
    assert await waiting._try()  # no wait for the lease duration


async def test_a_renewal_from_a_stale_read_loses_to_the_write_before_it(api: FakeApi) -> None:
    """Two electors read the same expired lease; the PUT of the one that writes
    second carries a stale resourceVersion: 409, and it is not leader."""
    clock = Clock()
    await api.client().create(
        LEASES,
        NS,
        {
            "metadata": {"name": "tfjob-operator"},
            "spec": {"holderIdentity": "gone", "leaseDurationSeconds": 15},
        },
    )
    one, two = _elector(api, "one", clock), _elector(api, "two", clock)
    assert not await one._try() and not await two._try()  # both start their clocks
    clock.now += 16
    assert await asyncio.gather(one._try(), two._try()) == [True, False]
    conflicts = [r for r in api.of("update", LEASES) if r.error is not None]
    assert [r.error.code for r in conflicts if hasattr(r.error, "code")] == [409]
    assert _lease(api)["holderIdentity"] == "one"


async def test_a_leader_that_cannot_renew_within_the_deadline_stops(api: FakeApi) -> None:
    clock = Clock()
    leader = _elector(api, "one", clock, retry_period=0.01, renew_deadline=5.0)
    assert await leader._try()
    api.fail(503, verb="get", resource=LEASES, times=1000)
    holding = asyncio.create_task(leader.hold())
    await until(lambda: len(api.of("get", LEASES)) >= 3)  # failing, within the deadline
    assert not holding.done() and leader.is_leader
    clock.now += 5
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(holding, 5)
    assert not leader.is_leader


async def test_a_leader_that_sees_another_holder_stops_at_once(api: FakeApi) -> None:
    """A leader stopped past its Lease (frozen, cut off) whose Lease another replica
    took stops at its first look, not after retrying for the renew deadline."""
    clock = Clock()
    leader = _elector(api, "one", clock, retry_period=0.01, renew_deadline=10.0)
    successor = _elector(api, "two", clock)
    assert await leader._try()
    assert not await successor._try()
    clock.now += 16  # the leader renews no more: the successor takes the Lease
    assert await successor._try()
    looks = len(api.of("get", LEASES))
    with pytest.raises(LeadershipLost, match="held by two"):
        await asyncio.wait_for(leader.hold(), 5)
    assert not leader.is_leader
    assert len(api.of("get", LEASES)) == looks + 1  # one look was enough


async def test_a_leader_stopped_past_its_deadline_keeps_a_lease_no_one_took(
    api: FakeApi,
) -> None:
    clock = Clock()
    leader = _elector(api, "one", clock, retry_period=0.01, renew_deadline=10.0)
    assert await leader._try()
    clock.now += 30  # stopped, but no other replica wanted the Lease
    holding = asyncio.create_task(leader.hold())
    await until(lambda: len(api.of("update", LEASES)) >= 2)
    assert not holding.done() and leader.is_leader
    holding.cancel()


async def test_the_lease_is_written_as_client_go_writes_it(api: FakeApi) -> None:
    """kubectl and client-go based tools read the same fields."""
    assert await _elector(api, "one", Clock(), lease_duration=20.0)._try()
    [create] = api.of("create", LEASES)
    assert create.body is not None
    assert (create.body["apiVersion"], create.body["kind"]) == ("coordination.k8s.io/v1", "Lease")
    spec = _lease(api)
    assert spec["leaseDurationSeconds"] == 20
    assert spec["acquireTime"] == spec["renewTime"]
    assert msgspec.json.decode(msgspec.json.encode(spec["renewTime"])).endswith("Z")
