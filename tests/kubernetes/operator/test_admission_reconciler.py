"""The reconciler's two ways out of a retry loop, and the dry run's shared verdicts,
in-process against the real API server.

- A dry-run refusal that is not permanent (the API server failing, not refusing) is
  retried: the reconcile raises (the queue backs off), the job is not failed, and the
  next reconcile creates its pods.
- An exception while the core reads a job's spec ends the job Failed, naming it.

The failures are injected: the API server cannot be made to answer 500 on demand, and
since the CRD carries the pod schema it no longer stores any spec known to make the
core raise (the corpus in tests/fixtures/malformed covers the ones that did). Everything else
(the client, the caches, the status writes) is real.
- A job like one admitted a moment ago (same template, a name of the same shape)
  sends no dry run; a job with another template still does, a bad one is still
  Failed, and a refusal is never shared: each bad job asks for itself. The dry runs
  are counted by a wrapper around the real client.
- A pod create the API server refuses as sent (422) is not retried with backoff: the
  reconcile raises a PermanentError, after the FailedCreatePod Event.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.helpers import IMAGE, tfjob, until
from testkit.operator_parts import OperatorParts
from testkit.operators import replica
from tfjob.api.errors import PermanentError
from tfjob.api.types import JobStatus
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller import reconciler as reconciler_module
from tfjob.runtimes.kubernetes.controller.dry_run import DryRun
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.transport.resources import jobs_of

TFJOBS = jobs_of(TENSORFLOW)

# A mount of a volume the pod does not have: the TFJob's schema cannot see it, the
# API server's pod validation refuses it (422).
_BAD_MOUNT = [
    {"name": "tensorflow", "image": IMAGE, "volumeMounts": [{"name": "nope", "mountPath": "/d"}]}
]


class FailingDryRuns:
    """The real client, except that the first `failures` dry runs answer 500."""

    def __init__(self, real: KubeClient, failures: int) -> None:
        self._real = real
        self.failures = failures

    async def create(
        self, resource: Any, namespace: str, body: dict[str, Any], *, dry_run: bool = False
    ) -> bytes:
        if dry_run and self.failures > 0:
            self.failures -= 1
            raise ApiError(500, "InternalError", "etcdserver: request timed out")
        return await self._real.create(resource, namespace, body, dry_run=dry_run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class CountingDryRuns:
    """The real client, counting the dry runs sent (by the created object's name)."""

    def __init__(self, real: KubeClient) -> None:
        self._real = real
        self.dry_runs: list[str] = []

    async def create(
        self, resource: Any, namespace: str, body: dict[str, Any], *, dry_run: bool = False
    ) -> bytes:
        if dry_run:
            self.dry_runs.append(body["metadata"]["name"])
        return await self._real.create(resource, namespace, body, dry_run=dry_run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


async def test_a_transient_dry_run_error_is_retried_not_failed(
    parts: OperatorParts, client: KubeClient
) -> None:
    flaky = FailingDryRuns(client, failures=1)
    reconciler = parts.reconciler(client=flaky)
    await parts.job("flaky")
    key = f"{parts.namespace}/flaky"
    with pytest.raises(ApiError):
        await reconciler.reconcile(key)
    assert (await parts.server_status("flaky")).conditions == []  # not Failed
    await reconciler.reconcile(key)  # the retry: admitted, pods created
    await until(lambda: parts.caches.pods.get(f"{parts.namespace}/flaky-worker-0"))


async def test_an_exception_while_reading_the_spec_fails_the_job(
    parts: OperatorParts, client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("containerPort")

    monkeypatch.setattr(reconciler_module, "decide", unreadable)
    reconciler = parts.reconciler(client=client)
    await parts.job("unreadable")
    key = f"{parts.namespace}/unreadable"
    await reconciler.reconcile(key)  # no exception: no retry loop
    status = await parts.server_status("unreadable")
    failed = next(c for c in status.conditions if c.type == "Failed")
    assert failed.reason == "InvalidTFJobSpec"
    assert "KeyError: 'containerPort'" in failed.message
    await until(lambda: parts.jobs.get(key).status.conditions != [])  # type: ignore[union-attr]
    await reconciler.reconcile(key)  # already Failed: nothing more to write
    assert [c.type for c in (await parts.server_status("unreadable")).conditions] == [
        "Created",
        "Failed",
    ]


async def _job(
    parts: OperatorParts, name: str, containers: list[dict[str, Any]] | None = None
) -> str:
    manifest = tfjob(name, parts.namespace, {"Worker": replica(2, "Never", containers)})
    await parts.client.create(TFJOBS, parts.namespace, manifest)
    key = f"{parts.namespace}/{name}"
    await until(lambda: parts.jobs.get(key) is not None)
    return key


def _failed(status: JobStatus) -> str | None:
    return next((c.message for c in status.conditions if c.type == "Failed"), None)


async def test_a_job_like_one_just_admitted_sends_no_dry_run(
    parts: OperatorParts, client: KubeClient
) -> None:
    counting = CountingDryRuns(client)
    reconciler = parts.reconciler(client=counting, dry_run=DryRun(counting))  # type: ignore[arg-type]
    await reconciler.reconcile(await _job(parts, "twin-1"))
    assert sorted(counting.dry_runs) == ["twin-1-worker-0", "twin-1-worker-0"]  # pod, service
    await reconciler.reconcile(await _job(parts, "twin-2"))  # same template, same shape
    assert len(counting.dry_runs) == 2
    await until(lambda: parts.caches.pods.get(f"{parts.namespace}/twin-2-worker-1"))
    # Another pod template: its pod is checked (its service is like twin-1's).
    other = [{"name": "tensorflow", "image": IMAGE + "-gpu"}]
    await reconciler.reconcile(await _job(parts, "twin-3", other))
    assert counting.dry_runs[2:] == ["twin-3-worker-0"]
    # A name of another shape (a digit where the others have a letter): its own check.
    await reconciler.reconcile(await _job(parts, "twi9-4"))
    assert counting.dry_runs[3:] == ["twi9-4-worker-0", "twi9-4-worker-0"]
    # A bad template: checked and Failed; and the next bad job of the same shape is
    # checked again (a refusal is never shared) and Failed too.
    for name in ("bad1-5", "bad1-6"):
        before = len(counting.dry_runs)
        await reconciler.reconcile(await _job(parts, name, _BAD_MOUNT))
        assert counting.dry_runs[before:] == [f"{name}-worker-0"]  # the pod's refusal ends it
        message = _failed(await parts.server_status(name))
        assert message is not None and "volumeMounts" in message
        assert parts.caches.pods.get(f"{parts.namespace}/{name}-worker-0") is None


async def test_an_accepted_verdict_stands_only_for_its_time(
    parts: OperatorParts, client: KubeClient
) -> None:
    counting = CountingDryRuns(client)
    now = [0.0]
    dry_run = DryRun(counting, ttl=60.0, clock=lambda: now[0])  # type: ignore[arg-type]
    reconciler = parts.reconciler(client=counting, dry_run=dry_run)
    await reconciler.reconcile(await _job(parts, "aged-1"))
    now[0] = 59.0
    await reconciler.reconcile(await _job(parts, "aged-2"))
    assert len(counting.dry_runs) == 2  # shared
    now[0] = 61.0
    await reconciler.reconcile(await _job(parts, "aged-3"))
    assert counting.dry_runs[2:] == ["aged-3-worker-0", "aged-3-worker-0"]  # asked again


async def test_a_create_refused_as_sent_is_not_retried_with_backoff(
    parts: OperatorParts, client: KubeClient
) -> None:
    # A job already admitted (its pods were checked before, e.g. by an earlier operator
    # process) whose next pod is refused: the dry run is skipped, the create meets 422.
    counting = CountingDryRuns(client)
    dry_run = DryRun(counting)  # type: ignore[arg-type]
    reconciler = parts.reconciler(client=counting, dry_run=dry_run)
    key = await _job(parts, "refused", _BAD_MOUNT)
    cached = parts.jobs.get(key)
    assert cached is not None
    dry_run._remember(cached.metadata.uid)  # admitted before
    with pytest.raises(PermanentError) as raised:
        await reconciler.reconcile(key)
    assert "422" in str(raised.value)
    assert not counting.dry_runs
    assert parts.caches.pods.get(f"{parts.namespace}/refused-worker-0") is None
