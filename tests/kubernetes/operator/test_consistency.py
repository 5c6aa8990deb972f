"""The shell's consistency rule, in-process: on the in-memory API (testkit/fake_api.py,
shown equal to the real server's answers, resourceVersions and watch events by
tests/kubernetes/test_fake_api_parity.py), and a restart on the real API server.

What it must guarantee (runtimes/kubernetes/cache/consistency.py, docs/consistency.md):
after a reconcile's own writes the job is held until the caches show them, so the next
reconcile neither repeats a create nor decides from a status older than its own (it
would stamp startTime again); a hold ends when the watch catches up, or after its
timeout when it never does; a status someone else changed is never overwritten, while
a metadata change alone does not stop ours; a deleted job's status is no error.
The informers are paused (their watches stopped) where a test needs the caches to lag.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import tfjob, until
from testkit.kubelet import FakeKubelet
from testkit.operator_parts import OperatorParts
from testkit.operators import replica
from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.api.types import JobCondition, JobStatus
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.cache.consistency import Held, JobView
from tfjob.runtimes.kubernetes.controller.status_writer import StatusConflict, StatusWriter
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient, TransportError
from tfjob.runtimes.kubernetes.transport.resources import jobs_of

TFJOBS = jobs_of(TENSORFLOW)

START = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _theirs() -> JobStatus:
    stamp = "2025-06-01T00:00:00Z"
    condition = JobCondition(
        type="Created",
        status="True",
        reason="Theirs",
        message="written by someone else",
        last_update_time=stamp,
        last_transition_time=stamp,
    )
    return JobStatus(conditions=[condition], start_time=stamp)


def _view(parts: OperatorParts, key: str) -> JobView:
    view = parts.caches.view(key)
    assert isinstance(view, JobView), view
    return view


async def test_a_job_is_held_until_the_caches_show_its_writes(fake_parts: OperatorParts) -> None:
    """Without the hold the second reconcile would see no pod (and create it again)
    and no status (and stamp startTime and Created again, 10 s later)."""
    parts = fake_parts
    now = [START]
    reconciler = parts.reconciler(clock=lambda: now[0])
    await parts.job("held")
    key = f"{parts.namespace}/held"
    await parts.pause()
    parts.requests.clear()
    result = await reconciler.reconcile(key)
    assert result.requeue_after is None  # the watch, not a timer, brings it back
    posts = parts.sent("POST")  # the dry runs of its first pod and service, then them
    assert posts == [201] * 4
    assert parts.sent("PUT") == [200]  # its status, once, after them

    held = parts.caches.view(key)
    assert isinstance(held, Held) and 0 < held.seconds <= parts.caches.hold_seconds
    again = await reconciler.reconcile(key)  # the caches lag: nothing is decided
    assert again.requeue_after is not None and again.requeue_after > 0
    assert len(parts.requests) == 5

    await parts.informers()  # the watches resume and catch up
    await until(lambda: isinstance(parts.caches.view(key), JobView))
    view = _view(parts, key)
    assert [p.metadata.name for p in view.pods] == ["held-worker-0"]
    assert view.job.status.start_time == "2026-01-01T12:00:00Z"
    now[0] = START + timedelta(seconds=10)
    await reconciler.reconcile(key)
    assert parts.sent("POST") == posts  # nothing created twice
    status = await parts.server_status("held")
    assert status.start_time == "2026-01-01T12:00:00Z"  # not stamped again
    assert [c.last_transition_time for c in status.conditions] == ["2026-01-01T12:00:00Z"]


async def test_a_restart_is_counted_before_its_pod_is_deleted_and_only_once(
    parts: OperatorParts, client: KubeClient, kubelet: FakeKubelet
) -> None:
    """A failed pod under ExitCode: its failure is written (restartCount, its UID in
    countedPods) before the pod is deleted, and the job is held until the cache shows
    the pod gone; the next reconcile makes its replacement and counts nothing again."""
    reconciler = parts.reconciler(clock=lambda: START)
    manifest = tfjob("restart", parts.namespace, {"Worker": replica(1, "ExitCode")})
    await client.create(TFJOBS, parts.namespace, manifest)
    key = f"{parts.namespace}/restart"
    await until(lambda: parts.jobs.get(key) is not None)
    await reconciler.reconcile(key)
    await until(lambda: isinstance(v := parts.caches.view(key), JobView) and len(v.pods) == 1)
    await asyncio.to_thread(kubelet.fail, parts.namespace, "restart-worker-0", 137)

    def failed() -> bool:
        view = parts.caches.view(key)
        return isinstance(view, JobView) and view.pods[0].status.phase == "Failed"

    await until(failed)
    uid = _view(parts, key).pods[0].metadata.uid
    await parts.pause()
    parts.requests.clear()
    await reconciler.reconcile(key)
    assert [method for method, _code in parts.requests] == ["PUT", "DELETE"]
    status = await parts.server_status("restart")
    assert (status.restart_count, status.counted_pods) == (1, [uid])
    assert isinstance(parts.caches.view(key), Held)  # until the cache shows the pod gone

    await parts.informers()
    await until(lambda: isinstance(parts.caches.view(key), JobView))
    assert _view(parts, key).pods == []
    await reconciler.reconcile(key)  # the replacement
    await until(lambda: isinstance(v := parts.caches.view(key), JobView) and len(v.pods) == 1)
    replacement = _view(parts, key).pods[0]
    assert replacement.metadata.uid != uid
    status = await parts.server_status("restart")
    assert (status.restart_count, status.counted_pods) == (1, [])


async def test_a_hold_ends_after_its_timeout_when_the_watch_never_shows_the_writes(
    fake_parts: OperatorParts,
) -> None:
    parts = fake_parts
    parts.caches.hold_seconds = 0.3
    reconciler = parts.reconciler(clock=lambda: START)
    await parts.job("lost")
    key = f"{parts.namespace}/lost"
    await parts.pause()  # as if the watch events were lost
    await reconciler.reconcile(key)
    assert isinstance(parts.caches.view(key), Held)
    await asyncio.sleep(0.35)
    assert isinstance(parts.caches.view(key), JobView)  # decided again from what is cached
    parts.requests.clear()
    with pytest.raises(StatusConflict):  # the stale status is not written over the new
        await reconciler.reconcile(key)
    assert sorted(parts.sent("POST")) == [409, 409]  # fixed names: AlreadyExists, no duplicate
    assert (await parts.server_status("lost")).start_time == "2026-01-01T12:00:00Z"


async def test_a_status_changed_by_someone_else_is_not_overwritten(
    fake_parts: OperatorParts, api: FakeApi
) -> None:
    parts = fake_parts
    reconciler = parts.reconciler(clock=lambda: START)
    await parts.job("conflict")
    key = f"{parts.namespace}/conflict"
    await parts.pause()
    other = api.client()  # another writer of the status
    theirs = {"status": msgspec.to_builtins(_theirs())}
    await other.merge_patch(TFJOBS, parts.namespace, "conflict", theirs, subresource="status")
    with pytest.raises(StatusConflict) as raised:
        await reconciler.reconcile(key)
    assert isinstance(raised.value, TemporaryError) and raised.value.delay == 0.0
    assert (await parts.server_status("conflict")).conditions[0].reason == "Theirs"
    assert isinstance(parts.caches.view(key), Held)  # until the cache shows their status
    await parts.informers()
    await until(lambda: isinstance(parts.caches.view(key), JobView))
    assert _view(parts, key).job.status.conditions[0].reason == "Theirs"


async def test_a_metadata_change_meanwhile_does_not_stop_the_status(
    fake_parts: OperatorParts,
) -> None:
    parts = fake_parts
    reconciler = parts.reconciler(clock=lambda: START)
    await parts.job("relabelled")
    await parts.pause()
    labels = {"metadata": {"labels": {"team": "x"}}}
    await parts.client.merge_patch(TFJOBS, parts.namespace, "relabelled", labels)
    parts.requests.clear()
    await reconciler.reconcile(f"{parts.namespace}/relabelled")
    assert parts.sent("PUT") == [409, 200]  # the version moved, the status had not
    assert (await parts.server_status("relabelled")).start_time == "2026-01-01T12:00:00Z"


async def test_a_deleted_jobs_status_write_is_no_error(fake_parts: OperatorParts) -> None:
    parts = fake_parts
    job = await parts.job("gone")
    await parts.client.delete(TFJOBS, parts.namespace, "gone")
    written = await StatusWriter(parts.client, TENSORFLOW).write(
        job.metadata, job.status, _theirs()
    )
    assert written is None
    await until(lambda: parts.caches.view(f"{parts.namespace}/gone") is None)


async def test_the_worker_loop_retries_by_the_kind_of_error(fake_parts: OperatorParts) -> None:
    """One place decides what a failure means for the queue (Operator.retry): a
    permanent error is given up, a temporary one with a delay comes back after it, any
    other error comes back with per-key backoff."""
    parts = fake_parts
    queue = parts.queue
    parts.start(queue.run_timer())
    parts.controller.retry("ns/gave-up", TransportError("connection reset"))  # a first failure
    assert await asyncio.wait_for(queue.get(), 5) == "ns/gave-up"  # after a short backoff
    queue.done("ns/gave-up")
    parts.controller.retry("ns/gave-up", PermanentError("cannot ever run"))
    with pytest.raises(TimeoutError):  # not queued again
        await asyncio.wait_for(queue.get(), 0.3)
    parts.controller.retry("ns/gave-up", TransportError("connection reset"))
    loop = asyncio.get_running_loop()
    asked = loop.time()
    assert await asyncio.wait_for(queue.get(), 5) == "ns/gave-up"
    assert loop.time() - asked < 0.1  # its backoff was forgotten: the first step again
    queue.done("ns/gave-up")
    asked = loop.time()
    parts.controller.retry("ns/later", TemporaryError("busy", delay=0.3))
    parts.controller.retry("ns/backoff", ApiError(500, "InternalError", "try again"))
    got = set()
    while "ns/later" not in got:
        got.add(await asyncio.wait_for(queue.get(), 5))
    assert loop.time() - asked >= 0.29
    assert "ns/backoff" in got  # a short first backoff: before the 0.3 s delay


def test_a_job_view_keeps_the_highest_version_written_per_resource() -> None:
    view = JobView("ns/j", TFJob(), [], [])
    view.wrote(TFJOBS, "120")
    view.wrote(TFJOBS, "99")  # an earlier write answered later
    view.wrote(TFJOBS, "")  # an answer without a version (a Status) holds nothing
    assert view.written == {TFJOBS: "120"}
