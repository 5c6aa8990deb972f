"""What the cluster commands read (interfaces/cluster_client/jobs_api.py), on the in-memory
API (testkit/fake_api.py): its paths, selectors and errors answer as the real API
server's (tests/kubernetes/test_fake_api_parity.py); the commands end to end run on
the real one (test_commands.py, test_kinds.py)."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import pytorchjob, tfjob
from tfjob.api import constants as c
from tfjob.frameworks.pytorch import PYTORCH
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.interfaces.cluster_client.jobs_api import (
    AmbiguousJob,
    JobsApi,
    NoJobApi,
    NoSuchJob,
    kind_named,
    replicas_asked,
)
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, jobs_of

NS = "team"
TFJOBS, PYTORCHJOBS = jobs_of(TENSORFLOW), jobs_of(PYTORCH)


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
    assert (await jobs.get(TENSORFLOW, "j"))["metadata"]["uid"] == created["metadata"]["uid"]
    assert [j["metadata"]["name"] for j in await jobs.list_jobs()] == ["j"]
    await jobs.delete(TENSORFLOW, "j")
    assert api.of("delete")[0].body == {"propagationPolicy": "Background"}
    with pytest.raises(NoSuchJob, match='no TFJob "j" in namespace team'):
        await jobs.get(TENSORFLOW, "j")
    with pytest.raises(NoSuchJob):
        await jobs.delete(TENSORFLOW, "j")


async def test_a_name_is_found_whatever_its_kind_and_said_ambiguous_across_kinds() -> None:
    api = FakeApi(namespaces=[NS], served=[PODS, EVENTS, TFJOBS, PYTORCHJOBS])
    jobs = _jobs(api)
    await jobs.create(pytorchjob("torch", None))
    await jobs.create(tfjob("both", None))
    await jobs.create(pytorchjob("both", None))
    found = await jobs.find("torch")
    assert (found["kind"], found["apiVersion"]) == ("PyTorchJob", "kubeflow.org/v1")
    with pytest.raises(AmbiguousJob) as ambiguous:
        await jobs.find("both")
    assert str(ambiguous.value) == (
        '"both" is a TFJob and a PyTorchJob in namespace team: say which, as tfjob/both '
        "or pytorchjob/both"
    )
    assert (await jobs.find("both", PYTORCH))["kind"] == "PyTorchJob"
    with pytest.raises(NoSuchJob, match=r'^no TFJob or PyTorchJob "ghost" in namespace team$'):
        await jobs.find("ghost")
    with pytest.raises(NoSuchJob, match=r'^no TFJob "torch" in namespace team$'):
        await jobs.find("torch", TENSORFLOW)
    listed = [(j["metadata"]["name"], j["kind"]) for j in await jobs.list_jobs()]
    assert listed == [("both", "TFJob"), ("both", "PyTorchJob"), ("torch", "PyTorchJob")]
    only = [j["metadata"]["name"] for j in await jobs.list_jobs(PYTORCH)]
    assert only == ["both", "torch"]


async def test_a_kind_without_its_crd_is_left_out_and_named_when_asked_for() -> None:
    jobs = _jobs(FakeApi(namespaces=[NS], served=[PODS, EVENTS, TFJOBS]))
    await jobs.create(tfjob("j", None))
    assert [j["kind"] for j in await jobs.list_jobs()] == ["TFJob"]
    with pytest.raises(NoSuchJob, match=r'^no TFJob "ghost" in namespace team$'):
        await jobs.find("ghost")  # looked for among the kinds served only
    missing = (
        "the cluster has no pytorchjobs.kubeflow.org resource (the PyTorchJob CRD is not "
        "installed): kubectl apply -k manifests/base, or install Kubeflow's training operator"
    )
    for request in (
        jobs.list_jobs(PYTORCH),
        jobs.get(PYTORCH, "j"),
        jobs.create(pytorchjob("t", None)),
        jobs.delete(PYTORCH, "j"),
    ):
        with pytest.raises(NoJobApi) as error:
            await request
        assert str(error.value) == missing


async def test_without_any_crd_every_missing_resource_is_named() -> None:
    jobs = _jobs(FakeApi(namespaces=[NS], served=[PODS, EVENTS]))
    with pytest.raises(NoJobApi) as error:
        await jobs.find("j")
    assert "tfjobs.kubeflow.org, pytorchjobs.kubeflow.org" in str(error.value)
    assert str(error.value).endswith(
        "kubectl apply -k manifests/base, or install Kubeflow's training operator"
    )


async def test_a_jobs_pods_by_its_kinds_labels_and_its_events_oldest_first() -> None:
    api = FakeApi(namespaces=[NS])
    client = api.client()
    for pod, job, operator in (
        ("j-worker-0", "j", "tfjob-controller"),
        ("j-master-0", "j", "pytorchjob-controller"),
        ("k-worker-0", "k", "tfjob-controller"),
        ("lone", "", ""),
    ):
        labels = {c.LABEL_JOB_NAME: job, c.LABEL_OPERATOR_NAME: operator} if job else {}
        await client.create(PODS, NS, {"metadata": {"name": pod, "labels": labels}})
    await client.create(EVENTS, NS, _event("j", "TFJob", "Later", "2026-12-01T10:00:05Z"))
    await client.create(EVENTS, NS, _event("j", "TFJob", "Sooner", "2026-12-01T10:00:01Z"))
    await client.create(EVENTS, NS, _event("j", "Pod", "NotTheJob", "2026-12-01T10:00:00Z"))
    await client.create(EVENTS, NS, _event("j", "PyTorchJob", "Torch", "2026-12-01T10:00:02Z"))
    jobs = _jobs(api)
    assert [p["metadata"]["name"] for p in await jobs.pods(TENSORFLOW, "j")] == ["j-worker-0"]
    assert [p["metadata"]["name"] for p in await jobs.pods(PYTORCH, "j")] == ["j-master-0"]
    every = [p["metadata"]["name"] for p in await jobs.pods()]
    assert every == ["j-master-0", "j-worker-0", "k-worker-0"]
    assert [e["reason"] for e in await jobs.events(TENSORFLOW, "j")] == ["Sooner", "Later"]
    assert [e["reason"] for e in await jobs.events(PYTORCH, "j")] == ["Torch"]


def test_kinds_are_named_as_kubectl_names_resources() -> None:
    for text in (
        "PyTorchJob",
        "pytorchjob",
        "pytorchjobs",
        "PYTORCHJOBS",
        "pytorchjobs.kubeflow.org",
    ):
        assert kind_named(text) is PYTORCH
    assert kind_named("tfjob.kubeflow.org") is TENSORFLOW
    assert kind_named("torch") is None
    assert kind_named("pytorchjobs.example.com") is None


def test_the_replicas_asked_for_are_read_through_the_kinds_model() -> None:
    master = {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch"}]}}}
    worker = {"template": {"spec": {"containers": [{"name": "pytorch"}]}}}  # 1 by default
    job = pytorchjob("t", NS, {"Master": master, "Worker": {**worker, "replicas": 3}})
    assert replicas_asked(job) == {"Master": 1, "Worker": 3}
    assert replicas_asked(pytorchjob("t", NS, {"Worker": worker})) == {"Worker": 1}
    assert replicas_asked(tfjob("t", NS, {"PS": {"replicas": "two"}})) == {}  # not a job


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
