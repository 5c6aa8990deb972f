"""The write-behind status lane against the real API server (in-process, no operator).

What it must guarantee (status_writer.py): statuses wait behind creates and deletes
but never for longer than their bound; a job decided twice gets one PUT of its latest
status; the next reconcile decides from the pending status, not the stale cache (so
startTime is not re-stamped); a real conflict drops the status and queues the job, a
metadata change does not; a deleted job's status is dropped; a flush writes all.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from testkit.helpers import tfjob
from testkit.operators import replica
from testkit.status_lane import Lane, until
from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.api.types import JobCondition, JobStatus
from tfjob.core.settings import Settings
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.decode import decode_tfjob
from tfjob.runtimes.kubernetes.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.reconciler import Reconciler
from tfjob.runtimes.kubernetes.resources import TFJOBS

START = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _status(reason: str, start: str = "2026-01-01T00:00:00Z") -> JobStatus:
    return JobStatus(
        conditions=[
            JobCondition(
                type="Created",
                status="True",
                reason=reason,
                message=reason,
                last_update_time=start,
                last_transition_time=start,
            )
        ],
        start_time=start,
    )


async def test_statuses_wait_behind_creates_and_coalesce_into_one_put(lane: Lane) -> None:
    job = await lane.job("coalesce")
    lane.start(lane.writer.run())
    with lane.writes.acting():  # a create is in flight
        lane.writer.defer(job, _status("First"), lane.note("first"), with_creates=True)
        lane.writer.defer(job, _status("Second"), lane.note("second"))
        await asyncio.sleep(0.2)
        assert lane.puts == []  # not while creates are in flight (bound: 0.5 s)
    await until(lambda: lane.stored)
    assert lane.puts == [200]  # one PUT for both decisions
    assert lane.stored == ["first", "second"]  # each decision's metrics counted once
    assert (await lane.server_status("coalesce")).conditions[0].reason == "Second"
    cached = lane.jobs.get(job.metadata.namespace + "/coalesce")
    assert cached is not None and cached.status.conditions[0].reason == "Second"  # written through
    assert len(lane.writer) == 0


async def test_a_status_never_waits_longer_than_its_bound(lane: Lane) -> None:
    job = await lane.job("bounded")
    lane.start(lane.writer.run())
    loop = asyncio.get_running_loop()
    with lane.writes.acting():  # creates never stop
        decided = loop.time()
        lane.writer.defer(job, _status("Bounded"), lane.note("stored"))
        await until(lambda: lane.stored, within=3)
        waited = loop.time() - decided
    assert 0.45 <= waited < 1.5  # max_delay is 0.5 s


async def test_with_no_create_in_flight_a_status_is_written_at_once(lane: Lane) -> None:
    job = await lane.job("prompt")
    lane.start(lane.writer.run())
    await asyncio.sleep(0.05)  # past the hold-off of any earlier create
    loop = asyncio.get_running_loop()
    decided = loop.time()
    lane.writer.defer(job, _status("Prompt"), lane.note("stored"))
    await until(lambda: lane.stored)
    assert loop.time() - decided < 0.2  # not the 0.5 s bound


async def test_the_next_reconcile_decides_from_the_pending_status(
    lane: Lane, client: KubeClient
) -> None:
    """Without the overlay the second pass would see no status in the cache and stamp
    startTime (and the Created condition) again, 10 s later."""
    now = [START]
    parts = lane.parts
    reconciler = Reconciler(
        client=client,
        caches=parts.caches,
        expectations=parts.expectations,
        recorder=parts.recorder,
        metrics=parts.metrics,
        settings=Settings(),
        status=lane.writer,  # not running: statuses stay pending
        clock=lambda: now[0],
    )
    await lane.job("overlay")
    key = f"{lane.namespace}/overlay"
    result = await reconciler.reconcile(key)  # creates the pod and the service, defers status
    assert result.requeue_after is None  # the watch events, not a timer, bring it back
    waiting = await reconciler.reconcile(key)  # expectations pending: look again later
    if not parts.expectations.satisfied(key):
        assert waiting.requeue_after is not None and 0 < waiting.requeue_after <= 300
    first = lane.writer.pending(key)
    assert first is not None and first.start_time == "2026-01-01T12:00:00Z"
    await until(lambda: parts.expectations.satisfied(key))  # the watch saw both
    now[0] = START + timedelta(seconds=10)
    await reconciler.reconcile(key)
    assert lane.writer.pending(key) == first
    assert lane.puts == []

    lane.start(lane.writer.run())
    await lane.writer.flush(5)
    assert lane.puts == [200]
    assert (await lane.server_status("overlay")).start_time == "2026-01-01T12:00:00Z"


async def test_a_status_changed_by_someone_else_is_dropped_and_the_job_queued(
    lane: Lane, kubeconfig: Path
) -> None:
    job = await lane.job("conflict")
    key = f"{lane.namespace}/conflict"
    lane.writer.defer(job, _status("Ours"), lane.note("ours"))
    other = KubeClient.connect(str(kubeconfig))  # another writer of the status
    try:
        theirs = {"status": msgspec.to_builtins(_status("Theirs"))}
        await other.merge_patch(TFJOBS, lane.namespace, "conflict", theirs, subresource="status")
    finally:
        await other.close()
    await until(lambda: (j := lane.jobs.get(key)) is not None and j.status.conditions != [])
    lane.start(lane.writer.run())
    assert await asyncio.wait_for(lane.queue.get(), 5) == key  # decided again
    assert lane.stored == [] and lane.puts == []
    assert (await lane.server_status("conflict")).conditions[0].reason == "Theirs"


async def test_a_metadata_change_meanwhile_does_not_drop_the_status(lane: Lane) -> None:
    job = await lane.job("relabelled")
    lane.writer.defer(job, _status("Ours"), lane.note("ours"))
    await lane.client.merge_patch(
        TFJOBS, lane.namespace, "relabelled", {"metadata": {"labels": {"team": "x"}}}
    )
    lane.start(lane.writer.run())
    await until(lambda: lane.stored)
    assert (await lane.server_status("relabelled")).conditions[0].reason == "Ours"


async def test_a_deleted_jobs_status_is_dropped(lane: Lane) -> None:
    job = await lane.job("gone")
    lane.writer.defer(job, _status("Late"), lane.note("late"))
    await lane.client.delete(TFJOBS, lane.namespace, "gone")
    await until(lambda: lane.jobs.get(f"{lane.namespace}/gone") is None)
    lane.start(lane.writer.run())
    await lane.writer.flush(5)
    assert lane.puts == [] and lane.stored == [] and len(lane.writer) == 0


async def test_a_flush_writes_every_pending_status_at_once(lane: Lane) -> None:
    jobs = [await lane.job(f"flush{i}") for i in range(5)]
    lane.start(lane.writer.run())
    with lane.writes.acting():  # even while creates are in flight
        for job in jobs:
            lane.writer.defer(job, _status("Flushed"), lane.note(job.metadata.name))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await lane.writer.flush(5)
        assert loop.time() - started < 0.4  # did not wait for the 0.5 s bound
    assert sorted(lane.stored) == [f"flush{i}" for i in range(5)]
    for i in range(5):
        assert (await lane.server_status(f"flush{i}")).conditions[0].reason == "Flushed"


async def test_a_synchronous_write_supersedes_the_pending_status(lane: Lane) -> None:
    job = await lane.job("first")
    key = f"{lane.namespace}/first"
    lane.writer.defer(job, _status("Pending"), lane.note("pending"))
    await lane.writer.write(job, _status("Restarted"), lane.note("restarted"))
    assert lane.writer.pending(key) is None
    assert lane.stored == ["pending", "restarted"]  # both counted, once
    lane.start(lane.writer.run())
    await asyncio.sleep(0.1)
    assert lane.puts == [200]
    assert (await lane.server_status("first")).conditions[0].reason == "Restarted"


async def test_a_stopping_operator_writes_its_pending_statuses_first(
    client: KubeClient, namespace: str, crd_installed: Any
) -> None:
    """SIGTERM's path (`stop` set): in-flight reconciles finish, then pending statuses
    are written before `run` returns - here one that would otherwise wait 5 s."""
    options = OperatorOptions(namespace=namespace, metrics_port=-1, health_port=-1, workers=1)
    operator = Operator(options, client)
    stop = asyncio.Event()
    with operator.writes.acting():  # creates in flight throughout: statuses wait
        running = asyncio.create_task(operator.run(stop))
        await client.create(TFJOBS, namespace, tfjob("stopping", namespace, {"Worker": replica(1)}))
        await until(lambda: len(operator.status) == 1)  # decided, not written
        stop.set()
        assert await asyncio.wait_for(running, 10) == 0
    status = decode_tfjob(await client.get(TFJOBS, namespace, "stopping")).status
    assert status.start_time is not None
    assert [c.type for c in status.conditions] == ["Created"]


async def test_the_worker_loop_retries_by_the_kind_of_error(lane: Lane) -> None:
    """One place decides what a failure means for the queue (Operator.retry): a
    permanent error is given up, a temporary one with a delay comes back after it, any
    other error comes back with per-key backoff."""
    queue = lane.queue
    lane.start(queue.run_timer())
    lane.parts.retry("ns/gave-up", TransportError("connection reset"))  # a first failure
    assert await asyncio.wait_for(queue.get(), 5) == "ns/gave-up"  # after a short backoff
    queue.done("ns/gave-up")
    lane.parts.retry("ns/gave-up", PermanentError("cannot ever run"))
    assert queue.retries("ns/gave-up") == 0  # its backoff forgotten
    assert len(queue) == 0 and queue.delayed == 0  # and not queued again
    loop = asyncio.get_running_loop()
    asked = loop.time()
    lane.parts.retry("ns/later", TemporaryError("busy", delay=0.3))
    lane.parts.retry("ns/backoff", ApiError(500, "InternalError", "try again"))
    assert queue.retries("ns/backoff") == 1 and queue.retries("ns/later") == 0
    got = set()
    while "ns/later" not in got:
        got.add(await asyncio.wait_for(queue.get(), 5))
    assert loop.time() - asked >= 0.29
    assert "ns/backoff" in got  # a short first backoff: before the 0.3 s delay
