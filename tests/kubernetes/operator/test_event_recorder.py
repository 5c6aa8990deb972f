"""The event recorder: repeats fold, nothing is lost, and Events yield to the
reconciler's creates and deletes (bounded; a flush waits for none).

Its logic runs on the in-memory API (testkit/fake_api.py, fixture ``api``); folding
through the real API server, and through a proxy's faults on it, runs on the real one."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from testkit.controlplane import ControlPlane
from testkit.fake_api import FakeApi
from testkit.fault_proxy import FaultProxy, Rule, token_of
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller import events as events_module
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import COMBINED_PREFIX, EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import EVENTS

# The job the events are about: a TFJob, reported by its kind's controller.
TFJOB_REF = {
    "kind": TENSORFLOW.kind,
    "api_version": TENSORFLOW.api_version,
    "reporter": TENSORFLOW.controller_name,
}

DROPS = ("rejected", "overflow", "shutdown")  # the reasons of tfjob_events_dropped_total


@asynccontextmanager
async def _sending(recorder: EventRecorder) -> AsyncIterator[None]:
    """The recorder's writers run for the block, and are stopped after it."""
    sender = asyncio.create_task(recorder.run())
    try:
        yield
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)


@asynccontextmanager
async def _through_faults(
    control_plane: ControlPlane, kubeconfig: Path, tmp_path: Path, seed: int, *rules: Rule
) -> AsyncIterator[tuple[FaultProxy, EventRecorder]]:
    """A recorder writing through a fault proxy with these rules (its writers running)."""
    with FaultProxy(upstream=control_plane.server, ca=control_plane.ca_path, seed=seed) as proxy:
        proxy.set_rules(*rules)
        proxied = proxy.write_kubeconfig(tmp_path / "faulty", token=token_of(kubeconfig))
        faulty = KubeClient.connect(str(proxied))
        recorder = EventRecorder(faulty)
        try:
            async with _sending(recorder):
                yield proxy, recorder
        finally:
            await faulty.close()


async def _events(client: Any, namespace: str) -> list[dict[str, object]]:
    listing = msgspec.json.decode(await client.list(EVENTS, namespace))
    return list(listing["items"])


async def test_repeats_fold_into_counts_and_every_occurrence_is_written(
    client: KubeClient, namespace: str
) -> None:
    recorder = EventRecorder(client)
    job = ObjectRef(namespace=namespace, name="j", uid="uid-1", **TFJOB_REF)
    async with _sending(recorder):
        for _ in range(100):  # a restart loop re-reporting one exit
            recorder.record(job, "Normal", "ExitedWithCode", "Pod: j-worker-0 exited with code 1")
        for i in range(14):  # more than 10 similar ones: combined
            recorder.record(job, "Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}")
        assert await recorder.flush(30)
    events = await _events(client, namespace)
    counts = {str(e["message"]): e["count"] for e in events}
    assert counts["Pod: j-worker-0 exited with code 1"] == 100
    assert counts[COMBINED_PREFIX + "Created pod: j-worker-13"] == 4
    assert sum(int(str(e["count"])) for e in events) == 114
    assert len(events) == 12  # 1 + 10 + 1 combined: repeats did not make new objects
    writes = recorder.metrics.create._value.get() + recorder.metrics.patch._value.get()
    assert writes < 114  # folded while waiting: fewer writes than occurrences


async def test_an_event_the_api_will_not_take_is_counted_as_dropped(api: FakeApi) -> None:
    recorder = EventRecorder(api.client())  # type: ignore[arg-type]
    gone = ObjectRef(namespace="no-such-namespace-here", name="j", uid="uid-2", **TFJOB_REF)
    async with _sending(recorder):
        recorder.record(gone, "Normal", "TFJobCreated", "TFJob j is created.")
        assert await recorder.flush(30)
    dropped = recorder.metrics.dropped.labels(reason="rejected")._value.get()
    assert dropped == 1


async def test_folded_repeats_are_counted_exactly_through_faults_on_every_write(
    client: KubeClient,
    control_plane: ControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    """About half the Event writes fail: 429, 500, or a reset after the API server
    carried them out (a POST retried then meets AlreadyExists, a PATCH of the count
    is sent again), while repeats keep folding into counts: still, each reason's
    Events count exactly the occurrences recorded, and none is given up."""
    rng = random.Random(3)
    recorded: Counter[str] = Counter()
    job = ObjectRef(namespace=namespace, name="j", uid="uid-6", **TFJOB_REF)
    faults = (Rule("429", 0.2), Rule("500", 0.15), Rule("reset-after", 0.2))
    async with _through_faults(control_plane, kubeconfig, tmp_path, 5, *faults) as (
        proxy,
        recorder,
    ):
        for _ in range(30):  # bursts of repeats, some folding while on the wire
            for _ in range(10):
                reason = rng.choice(["ExitedWithCode", "SuccessfulCreatePod", "Restarting"])
                recorder.record(job, "Normal", reason, f"worker-{rng.randrange(12)}")
                recorded[reason] += 1
            await asyncio.sleep(0.05)
        assert await recorder.flush(60)
    held: Counter[str] = Counter()
    for event in await _events(client, namespace):
        held[str(event["reason"])] += int(str(event["count"]))
    assert held == recorded
    assert recorder.metrics.patch._value.get() > 0  # counts of stored events were bumped
    assert proxy.injected["reset-after"] > 0
    assert sum(recorder.metrics.dropped.labels(reason=r)._value.get() for r in DROPS) == 0


async def _written(recorder: EventRecorder, within: float) -> float:
    """Seconds until nothing is pending (polled every 10 ms)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while recorder.pending:
        assert loop.time() - started < within, f"{recorder.pending} events still pending"
        await asyncio.sleep(0.01)
    return loop.time() - started


async def test_events_wait_while_creates_are_in_flight_and_all_follow_them(api: FakeApi) -> None:
    client, namespace = api.client(), "default"
    writes = ReconcileWrites()
    recorder = EventRecorder(client, writes=writes, max_wait=30)
    job = ObjectRef(namespace=namespace, name="j", uid="uid-3", **TFJOB_REF)
    async with _sending(recorder):
        with writes.acting():  # a reconcile's creates are on the wire
            for i in range(8):
                recorder.record(job, "Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}")
            recorder.record(job, "Normal", "SuccessfulCreatePod", "Created pod: j-worker-0")
            await asyncio.sleep(0.5)
            assert await _events(client, namespace) == []  # none while creates go on
            assert recorder.pending == 8  # waiting, the repeat folded in
        await _written(recorder, within=5)  # quiet now: all of them go
    events = await _events(client, namespace)
    assert len(events) == 8
    assert sum(int(str(e["count"])) for e in events) == 9 == recorder.metrics.recorded._value.get()
    assert recorder.metrics.dropped.labels(reason="shutdown")._value.get() == 0


async def test_an_event_waits_behind_creates_no_longer_than_its_bound(api: FakeApi) -> None:
    client, namespace = api.client(), "default"
    writes = ReconcileWrites()
    recorder = EventRecorder(client, writes=writes, max_wait=0.5)
    job = ObjectRef(namespace=namespace, name="j", uid="uid-4", **TFJOB_REF)
    async with _sending(recorder):
        with writes.acting():  # creates never stop
            recorder.record(job, "Normal", "TFJobCreated", "TFJob j is created.")
            waited = await _written(recorder, within=5)
    assert 0.45 <= waited < 2.0
    assert len(await _events(client, namespace)) == 1


async def test_a_flush_writes_every_event_at_once_even_while_creates_go_on(api: FakeApi) -> None:
    client, namespace = api.client(), "default"
    writes = ReconcileWrites()
    recorder = EventRecorder(client, writes=writes, max_wait=30)
    job = ObjectRef(namespace=namespace, name="j", uid="uid-5", **TFJOB_REF)
    loop = asyncio.get_running_loop()
    async with _sending(recorder):
        with writes.acting():
            for i in range(5):
                recorder.record(job, "Normal", "SuccessfulCreateService", f"Created service: s{i}")
            started = loop.time()
            assert await recorder.flush(10)  # SIGTERM's path
            assert loop.time() - started < 5  # not the 30 s bound
    assert len(await _events(client, namespace)) == 5


async def test_events_wait_for_writes_in_flight_until_due() -> None:
    """The rule Events yield by (activity.py): busy - wait until due, and wake
    listeners when the last write ends; quiet - go after the holdoff, or when due if
    sooner."""
    writes = ReconcileWrites(holdoff=0.2)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    writes.listen(woken)
    due = loop.time() + 10
    assert writes.wait(due) <= 0  # never busy: go at once
    with writes.acting(), writes.acting():
        assert 9 < writes.wait(due) <= 10
    assert woken.is_set()  # both ended: waiters look again
    assert 0.1 < writes.wait(due) <= 0.2  # the holdoff after the last one
    assert writes.wait(loop.time() + 0.05) <= 0.05  # due sooner than the holdoff ends
    await asyncio.sleep(0.21)
    assert writes.wait(due) <= 0


async def test_events_recorded_within_the_clocks_resolution_are_all_written(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events are named after the job and the time in nanoseconds. A clock that gives
    the same reading twice (a coarse clock, or one stepped back) must not give two
    events one name: the second write would meet AlreadyExists and count as done."""
    monkeypatch.setattr(events_module.time, "time_ns", lambda: 1_700_000_000_000_000_000)
    client, namespace = api.client(), "default"
    recorder = EventRecorder(client)  # type: ignore[arg-type]
    job = ObjectRef(namespace=namespace, name="j", uid="uid-3", **TFJOB_REF)
    async with _sending(recorder):
        for i in range(3):
            recorder.record(job, "Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}")
        assert await recorder.flush(30)
    messages = sorted(str(e["message"]) for e in await _events(client, namespace))
    assert messages == [f"Created pod: j-worker-{i}" for i in range(3)]


async def test_a_flush_does_not_wait_out_the_writers_retry_backoff(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every writer failed once (503) and backs off for 30 s; SIGTERM's flush must not
    wait for them: the event is written within a second and none counted dropped."""
    monkeypatch.setattr(events_module, "RETRY_BASE", 30.0)
    monkeypatch.setattr(events_module, "RETRY_MAX", 30.0)
    client, namespace = api.client(), "default"
    job = ObjectRef(namespace=namespace, name="j", uid="uid-9", **TFJOB_REF)
    api.fail(503, verb="create", resource=EVENTS, times=events_module.SENDERS)
    recorder = EventRecorder(client)  # type: ignore[arg-type]
    async with _sending(recorder):
        recorder.record(job, "Normal", "TFJobCreated", "TFJob j is created.")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len([r for r in api.of("create") if r.error]) < events_module.SENDERS:
            assert loop.time() < deadline, "the writers did not all fail once"
            await asyncio.sleep(0.01)
        started = loop.time()
        assert await recorder.flush(5)
        assert loop.time() - started < 1.0
    (event,) = await _events(client, namespace)
    assert event["message"] == "TFJob j is created." and event["count"] == 1
    assert recorder.metrics.dropped.labels(reason="shutdown")._value.get() == 0


async def test_a_create_whose_answer_was_lost_is_not_written_twice(api: FakeApi) -> None:
    """The API server stored the Event but the answer never came (a reset): the
    retried POST meets AlreadyExists, and the count is patched onto the stored one,
    not sent as a second Event."""
    client, namespace = api.client(), "default"
    api.fail(TransportError("reset"), verb="create", resource=EVENTS, after=True)
    recorder = EventRecorder(client)  # type: ignore[arg-type]
    job = ObjectRef(namespace=namespace, name="j", uid="uid-7", **TFJOB_REF)
    async with _sending(recorder):
        recorder.record(job, "Normal", "TFJobCreated", "TFJob j is created.")
        assert await recorder.flush(10)
    (event,) = await _events(client, namespace)
    assert event["count"] == 1
    answers = [
        (r.verb, r.error.code if isinstance(r.error, ApiError) else r.error)
        for r in api.of(resource=EVENTS)
    ]
    assert [verb for verb, _ in answers] == ["create", "create", "patch", "list"]
    assert answers[1][1] == 409  # AlreadyExists
    assert recorder.metrics.retries._value.get() == 1
