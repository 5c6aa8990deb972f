"""What the cluster commands read (runtimes/kubernetes/jobs_api.py), on the in-memory
API (testkit/fake_api.py): its paths, selectors and errors answer as the real API
server's (tests/kubernetes/test_fake_api_parity.py); the commands end to end run on
the real one (test_commands.py)."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import tfjob
from tfjob.api import constants as c
from tfjob.runtimes.kubernetes.jobs_api import JobsApi, NoSuchJob, NoTFJobApi
from tfjob.runtimes.kubernetes.resources import EVENTS, PODS

NS = "team"


def _jobs(api: FakeApi) -> JobsApi:
    client: Any = api.client()
    return JobsApi(client, NS)


def _event(name: str, kind: str, reason: str, at: str) -> dict[str, Any]:
    return {
        "metadata": {"generateName": f"{name}."},
        "involvedObject": {"kind": kind, "name": name, "namespace": NS},
        "reason": reason,
        "lastTimestamp": at,
    }


async def test_a_job_is_submitted_read_listed_and_deleted() -> None:
    api = FakeApi(namespaces=[NS])
    jobs = _jobs(api)
    created = await jobs.create(tfjob("j", None))
    assert created["metadata"]["namespace"] == NS
    assert (await jobs.get("j"))["metadata"]["uid"] == created["metadata"]["uid"]
    assert [j["metadata"]["name"] for j in await jobs.list_jobs()] == ["j"]
    await jobs.delete("j")
    assert api.of("delete")[0].body == {"propagationPolicy": "Background"}
    with pytest.raises(NoSuchJob, match='no TFJob "j" in namespace team'):
        await jobs.get("j")
    with pytest.raises(NoSuchJob):
        await jobs.delete("j")


async def test_without_the_crd_a_missing_job_says_the_api_is_missing() -> None:
    jobs = _jobs(FakeApi(namespaces=[NS], served=[PODS, EVENTS]))
    with pytest.raises(NoTFJobApi, match="kubectl apply -k manifests/base"):
        await jobs.get("j")


async def test_a_jobs_pods_and_events_oldest_first() -> None:
    api = FakeApi(namespaces=[NS])
    client = api.client()
    for pod, job in (("j-worker-0", "j"), ("k-worker-0", "k"), ("lone", "")):
        labels = {c.LABEL_JOB_NAME: job} if job else {}
        await client.create(PODS, NS, {"metadata": {"name": pod, "labels": labels}})
    await client.create(EVENTS, NS, _event("j", "TFJob", "Later", "2026-12-01T10:00:05Z"))
    await client.create(EVENTS, NS, _event("j", "TFJob", "Sooner", "2026-12-01T10:00:01Z"))
    await client.create(EVENTS, NS, _event("j", "Pod", "NotTheJob", "2026-12-01T10:00:00Z"))
    jobs = _jobs(api)
    assert [p["metadata"]["name"] for p in await jobs.pods("j")] == ["j-worker-0"]
    assert [p["metadata"]["name"] for p in await jobs.pods()] == ["j-worker-0", "k-worker-0"]
    assert [e["reason"] for e in await jobs.events("TFJob", "j")] == ["Sooner", "Later"]


async def test_a_log_is_read_line_by_line_with_its_timestamps() -> None:
    api = FakeApi(namespaces=[NS])
    await api.client().create(PODS, NS, {"metadata": {"name": "p"}})
    api.set_log(NS, "p", ["2026-12-01T10:00:00.1Z step 1", "2026-12-01T10:00:00.2Z step 2"])
    lines = [line async for line in _jobs(api).log("p", "tensorflow", follow=True)]
    assert [(line.time, line.text) for line in lines] == [
        ("2026-12-01T10:00:00.1Z", "step 1"),
        ("2026-12-01T10:00:00.2Z", "step 2"),
    ]
    [request] = api.of("get")
    assert request.body == {"container": "tensorflow", "timestamps": "true", "follow": "true"}
