"""The reconciler's two ways out of a retry loop, in-process against the real API server.

- A dry-run refusal that is not permanent (the API server failing, not refusing) is
  retried: the reconcile raises (the queue backs off), the job is not failed, and the
  next reconcile creates its pods.
- An exception while the core reads a job's spec ends the job Failed, naming it.

The failures are injected: the API server cannot be made to answer 500 on demand, and
since the CRD carries the pod schema it no longer stores any spec known to make the
core raise (the corpus in tests/validation covers the ones that did). Everything else
(the client, the caches, the status writes) is real.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.status_lane import Lane, until
from tfjob.core.settings import Settings
from tfjob.runtimes.kubernetes import reconciler as reconciler_module
from tfjob.runtimes.kubernetes.client import ApiError, KubeClient
from tfjob.runtimes.kubernetes.reconciler import Reconciler


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


def _reconciler(lane: Lane, client: Any) -> Reconciler:
    parts = lane.parts
    return Reconciler(
        client=client,
        caches=parts.caches,
        expectations=parts.expectations,
        recorder=parts.recorder,
        metrics=parts.metrics,
        settings=Settings(),
        status=lane.writer,
    )


async def test_a_transient_dry_run_error_is_retried_not_failed(
    lane: Lane, client: KubeClient
) -> None:
    flaky = FailingDryRuns(client, failures=1)
    reconciler = _reconciler(lane, flaky)
    await lane.job("flaky")
    key = f"{lane.namespace}/flaky"
    with pytest.raises(ApiError):
        await reconciler.reconcile(key)
    assert lane.writer.pending(key) is None
    assert (await lane.server_status("flaky")).conditions == []  # not Failed
    await reconciler.reconcile(key)  # the retry: admitted, pods created
    await until(lambda: lane.parts.caches.pods.get(f"{lane.namespace}/flaky-worker-0"))


async def test_an_exception_while_reading_the_spec_fails_the_job(
    lane: Lane, client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("containerPort")

    monkeypatch.setattr(reconciler_module, "decide", unreadable)
    reconciler = _reconciler(lane, client)
    await lane.job("unreadable")
    key = f"{lane.namespace}/unreadable"
    await reconciler.reconcile(key)  # no exception: no retry loop
    status = await lane.server_status("unreadable")
    failed = next(c for c in status.conditions if c.type == "Failed")
    assert failed.reason == "InvalidTFJobSpec"
    assert "KeyError: 'containerPort'" in failed.message
    await until(lambda: lane.jobs.get(key).status.conditions != [])  # type: ignore[union-attr]
    await reconciler.reconcile(key)  # already Failed: nothing more to write
    assert [c.type for c in (await lane.server_status("unreadable")).conditions] == [
        "Created",
        "Failed",
    ]
