"""The event recorder against the real API server: repeats fold, nothing is lost."""

from __future__ import annotations

import asyncio

import msgspec

from tfjob.runtimes.kubernetes.client import KubeClient
from tfjob.runtimes.kubernetes.events import COMBINED_PREFIX, EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.resources import EVENTS


async def _events(client: KubeClient, namespace: str) -> list[dict[str, object]]:
    listing = msgspec.json.decode(await client.list(EVENTS, namespace))
    return list(listing["items"])


async def test_repeats_fold_into_counts_and_every_occurrence_is_written(
    client: KubeClient, namespace: str
) -> None:
    recorder = EventRecorder(client)
    sender = asyncio.create_task(recorder.run())
    job = ObjectRef(namespace=namespace, name="j", uid="uid-1")
    try:
        for _ in range(100):  # a restart loop re-reporting one exit
            recorder.record(job, "Normal", "ExitedWithCode", "Pod: j-worker-0 exited with code 1")
        for i in range(14):  # more than 10 similar ones: combined
            recorder.record(job, "Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}")
        assert await recorder.flush(30)
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    events = await _events(client, namespace)
    counts = {str(e["message"]): e["count"] for e in events}
    assert counts["Pod: j-worker-0 exited with code 1"] == 100
    assert counts[COMBINED_PREFIX + "Created pod: j-worker-13"] == 4
    assert sum(int(str(e["count"])) for e in events) == 114
    assert len(events) == 12  # 1 + 10 + 1 combined: repeats did not make new objects
    writes = recorder.metrics.create._value.get() + recorder.metrics.patch._value.get()
    assert writes < 114  # folded while waiting: fewer writes than occurrences


async def test_an_event_the_api_will_not_take_is_counted_as_dropped(
    client: KubeClient,
) -> None:
    recorder = EventRecorder(client)
    sender = asyncio.create_task(recorder.run())
    gone = ObjectRef(namespace="no-such-namespace-here", name="j", uid="uid-2")
    try:
        recorder.record(gone, "Normal", "TFJobCreated", "TFJob j is created.")
        assert await recorder.flush(30)
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    dropped = recorder.metrics.dropped.labels(reason="rejected")._value.get()
    assert dropped == 1
