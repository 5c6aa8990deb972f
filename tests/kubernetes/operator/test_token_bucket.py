"""The client's token bucket (--kube-api-qps): status PUTs ahead of queued creates.

Pure: the bucket only needs an event loop. Rates are high (ms per token) so the
tests are quick; the order of grants is what is checked, never a duration.
"""

from __future__ import annotations

import asyncio

from tfjob.runtimes.kubernetes.transport.client import Throttle, TokenBucket, _resource_of


async def _queue(bucket: TokenBucket, order: list[str], *waiters: tuple[str, bool]) -> None:
    async def one(name: str, first: bool) -> None:
        await bucket.take(first=first)
        order.append(name)

    tasks = []
    for name, first in waiters:
        tasks.append(asyncio.create_task(one(name, first)))
        await asyncio.sleep(0)  # queued in this order
    await asyncio.gather(*tasks)


async def test_a_status_waiting_behind_creates_gets_the_next_token() -> None:
    # 50 ms a token: queueing the eight takes far less even on a loaded machine (at 2 ms
    # a token, a worker descheduled while queueing let two creates in before a status).
    bucket = TokenBucket(qps=20, burst=2)
    order: list[str] = []
    creates = [(f"create-{i}", False) for i in range(6)]
    await _queue(bucket, order, *creates, ("status-a", True), ("status-b", True))
    # The burst went to the first two creates at once; every later token goes to the
    # statuses first, in their order, then to the rest of the creates in theirs.
    assert order == [
        "create-0",
        "create-1",
        "status-a",
        "status-b",
        "create-2",
        "create-3",
        "create-4",
        "create-5",
    ]


async def test_without_priority_waiters_are_served_in_arrival_order() -> None:
    bucket = TokenBucket(qps=500, burst=1)
    order: list[str] = []
    await _queue(bucket, order, *[(f"w{i}", False) for i in range(5)])
    assert order == ["w0", "w1", "w2", "w3", "w4"]


async def test_the_rate_holds_for_both_queues_together() -> None:
    bucket = TokenBucket(qps=200, burst=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    order: list[str] = []
    await _queue(bucket, order, *[(f"w{i}", i % 2 == 0) for i in range(9)])
    # 1 token at once, 8 more at 5 ms each: at least 40 ms, whatever the order.
    assert loop.time() - started >= 8 / 200 * 0.95
    assert sorted(order) == sorted(f"w{i}" for i in range(9))


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    bucket = TokenBucket(qps=100, burst=1)
    await bucket.take()  # the burst is spent
    order: list[str] = []

    async def one(name: str) -> None:
        await bucket.take()
        order.append(name)

    gone = asyncio.create_task(one("gone"))
    await asyncio.sleep(0)
    kept = asyncio.create_task(one("kept"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, kept, return_exceptions=True)
    assert order == ["kept"]
    assert gone.cancelled()


async def test_each_resource_has_a_budget_of_its_own() -> None:
    """As in controller-runtime (a REST client, so a bucket, per kind): a JobSet apply
    does not wait behind queued ConfigMap applies, and a JobSet's status PUT spends
    the JobSets' budget."""
    throttle = Throttle(qps=500, burst=1)
    order: list[str] = []

    async def one(name: str, path: str) -> None:
        await throttle.bucket(_resource_of(path)).take()
        order.append(name)

    snapshots = "/api/v1/namespaces/ns/configmaps/{}"
    jobsets = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/{}"
    tasks = [asyncio.create_task(one(f"snapshot-{i}", snapshots.format(i))) for i in range(4)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(one("jobset-0", jobsets.format(0))))
    tasks.append(asyncio.create_task(one("jobset-0-status", jobsets.format("0/status"))))
    await asyncio.gather(*tasks)
    # Each bucket's burst of 1 went at once: the first snapshot and the first JobSet
    # apply; the JobSet's status waited for the JobSets' next token, not the snapshots'.
    assert order[:2] == ["snapshot-0", "jobset-0"]
    assert order.index("jobset-0-status") < order.index("snapshot-3")
    assert _resource_of("/api/v1/namespaces/ns/pods/p/log") == _resource_of("/api/v1/pods")
    assert _resource_of("/apis") == _resource_of("/version") == ""
