"""The work queue's promises, on a real event loop (no control plane, no mocks)."""

from __future__ import annotations

import asyncio
import random

import pytest

from tfjob.runtimes.kubernetes.cache.backoff import ExponentialBackoff
from tfjob.runtimes.kubernetes.cache.workqueue import NEW_SHARE, WorkQueue


async def _get(queue: WorkQueue, within: float = 1.0) -> str | None:
    return await asyncio.wait_for(queue.get(), within)


async def test_a_key_added_many_times_is_processed_once() -> None:
    queue = WorkQueue()
    for _ in range(5):
        queue.add("ns/a")
    queue.add("ns/b")
    assert len(queue) == 2
    assert await _get(queue) == "ns/a"
    assert await _get(queue) == "ns/b"
    with pytest.raises(TimeoutError):
        await _get(queue, 0.05)


async def test_a_key_being_processed_is_not_handed_to_another_worker() -> None:
    queue = WorkQueue()
    queue.add("ns/a")
    assert await _get(queue) == "ns/a"
    queue.add("ns/a")  # changed again while a worker holds it
    queue.add("ns/a")
    with pytest.raises(TimeoutError):
        await _get(queue, 0.05)  # a second worker must not get it now
    queue.done("ns/a")
    assert await _get(queue) == "ns/a"  # ... but it comes back exactly once
    queue.done("ns/a")
    with pytest.raises(TimeoutError):
        await _get(queue, 0.05)


async def test_many_workers_never_hold_the_same_key_at_once() -> None:
    queue = WorkQueue()
    holding: set[str] = set()
    processed = 0
    clash = []

    async def worker() -> None:
        nonlocal processed
        while (key := await queue.get()) is not None:
            if key in holding:
                clash.append(key)
            holding.add(key)
            await asyncio.sleep(random.random() / 1000)
            holding.discard(key)
            processed += 1
            queue.done(key)

    async def producer() -> None:
        for _ in range(2000):
            queue.add(f"ns/{random.randrange(10)}")
            if random.random() < 0.3:
                await asyncio.sleep(0)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    await producer()
    for _ in range(1000):  # until drained
        if not len(queue) and not queue.in_flight():
            break
        await asyncio.sleep(0.01)
    queue.shut_down()
    await asyncio.gather(*workers)
    assert clash == []
    assert 10 <= processed < 2000  # deduplicated, and every key was seen


async def test_delayed_keys_come_out_in_deadline_order_and_on_time() -> None:
    queue = WorkQueue()
    timer = asyncio.create_task(queue.run_timer())
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("ns/late", 0.6)
    queue.add_after("ns/early", 0.2)
    queue.add_after("ns/middle", 0.4)
    seen = []
    for _ in range(3):
        key = await _get(queue)
        seen.append((key, loop.time() - start))
    queue.shut_down()
    await timer
    assert [k for k, _ in seen] == ["ns/early", "ns/middle", "ns/late"]
    # Apart by 0.2 s and each within 0.15 s of its deadline: a busy machine (the suite
    # on 2 cores) may run the loop a little late, a timer that waits for something
    # else (the next key, a poll) is later still.
    for (_key, at), due in zip(seen, (0.2, 0.4, 0.6), strict=True):
        assert due <= at < due + 0.15


async def test_an_earlier_deadline_for_a_key_wins_and_fires_once() -> None:
    queue = WorkQueue()
    timer = asyncio.create_task(queue.run_timer())
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("ns/a", 5.0)
    queue.add_after("ns/a", 0.05)  # e.g. a new deadline that is sooner
    queue.add_after("ns/a", 3.0)  # a later one does not postpone it
    assert await _get(queue) == "ns/a"
    assert loop.time() - start < 0.5
    queue.done("ns/a")
    with pytest.raises(TimeoutError):  # the later deadlines were dropped
        await _get(queue, 0.1)
    queue.shut_down()
    await timer


async def test_the_timer_stops_when_cancelled_as_it_is_woken() -> None:
    """The operator cancels the timer at shutdown while writes keep waking it: a
    cancellation that lands as the wake does must stop it (asyncio.wait_for on 3.11
    swallowed it, and the operator's shutdown hung waiting for the timer)."""
    queue = WorkQueue()
    queue.add_after("ns/b", 10.0)
    timer = asyncio.create_task(queue.run_timer())
    await asyncio.sleep(0.01)  # waiting for that deadline
    queue.add_after("ns/a", 5.0)  # an earlier one wakes it...
    timer.cancel()  # ...in the same step as the cancellation
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(timer, 1)


async def test_zero_delay_adds_at_once() -> None:
    queue = WorkQueue()
    queue.add_after("ns/a", 0)
    assert await _get(queue, 0.05) == "ns/a"


async def test_failures_back_off_exponentially_until_forgotten() -> None:
    backoff = ExponentialBackoff(base=0.005, cap=1000.0)
    delays = [backoff.when("ns/a") for _ in range(6)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.16])
    assert backoff.when("ns/b") == pytest.approx(0.005)  # per key
    for _ in range(40):
        backoff.when("ns/a")
    assert backoff.when("ns/a") == 1000.0  # capped
    backoff.forget("ns/a")
    assert backoff.when("ns/a") == pytest.approx(0.005)


async def test_rate_limited_retries_wait_longer_each_time() -> None:
    # Steps of 0.1 s: a forgotten key's first step (0.1) is told from its next (0.2)
    # with room for a loaded machine's late loop.
    queue = WorkQueue(backoff=ExponentialBackoff(base=0.1))
    timer = asyncio.create_task(queue.run_timer())
    loop = asyncio.get_running_loop()
    waits = []
    for _ in range(3):
        start = loop.time()
        queue.add_rate_limited("ns/a")
        assert await _get(queue) == "ns/a"
        waits.append(loop.time() - start)
        queue.done("ns/a")
    assert waits[0] >= 0.1 and waits[1] >= 0.2 and waits[2] >= 0.4
    queue.forget("ns/a")
    start = loop.time()
    queue.add_rate_limited("ns/a")
    assert await _get(queue) == "ns/a"
    assert loop.time() - start < 0.2  # the first step again
    queue.shut_down()
    await timer


async def test_shutdown_releases_waiting_workers_and_stops_handing_out_work() -> None:
    queue = WorkQueue()
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("ns/a")
    assert await waiting == "ns/a"
    queue.add("ns/b")
    idle = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    # the idle worker got "ns/b" or None; either way nobody blocks and no new work starts
    assert await asyncio.wait_for(idle, 0.5) in ("ns/b", None)
    assert await _get(queue) is None
    queue.done("ns/a")  # the in-flight reconcile still finishes cleanly
    queue.add("ns/c")
    assert await _get(queue) is None


async def _drain(queue: WorkQueue) -> list[str]:
    """Every key now waiting, in the order workers would get them."""
    order = []
    while len(queue):
        key = await _get(queue)
        assert key is not None
        order.append(key)
        queue.done(key)
    return order


async def test_a_started_pod_of_a_created_job_is_handled_before_new_jobs() -> None:
    # A burst of new jobs is waiting; job "old" already has pods and one of them
    # started: its status must not wait for every new job to be created first.
    queue = WorkQueue()
    for i in range(5):
        queue.add_new(f"ns/new-{i}")
    queue.add("ns/old")
    assert await _get(queue) == "ns/old"
    queue.done("ns/old")
    assert await _drain(queue) == [f"ns/new-{i}" for i in range(5)]  # still FIFO


async def test_a_change_to_a_job_waiting_as_new_moves_it_up_once() -> None:
    queue = WorkQueue()
    for name in ("a", "b", "c"):
        queue.add_new(f"ns/{name}")
    queue.add("ns/c")  # its pods appeared (a relist after a restart, say)
    queue.add_new("ns/c")  # a later "new" add never moves it back down
    assert len(queue) == 3
    assert await _drain(queue) == ["ns/c", "ns/a", "ns/b"]  # c once, not twice


async def test_a_reaction_while_the_job_is_processed_comes_back_first() -> None:
    queue = WorkQueue()
    queue.add_new("ns/a")
    assert await _get(queue) == "ns/a"  # its first reconcile, creating pods
    queue.add_new("ns/b")
    queue.add("ns/a")  # one of a's pods started meanwhile
    queue.done("ns/a")
    assert await _drain(queue) == ["ns/a", "ns/b"]


async def test_new_jobs_are_not_starved_by_a_stream_of_reactions() -> None:
    queue = WorkQueue()
    queue.add_new("ns/new")
    served = []
    for i in range(3 * NEW_SHARE):
        queue.add(f"ns/old-{i}")
        key = await _get(queue)
        assert key is not None
        served.append(key)
        queue.done(key)
        if key == "ns/new":
            break
    assert served[-1] == "ns/new"
    assert len(served) == NEW_SHARE + 1  # one turn after NEW_SHARE reactions
