"""The TrainJob controller in the operator, on the in-memory API (testkit/fake_api.py):
a TrainJob becomes its JobSet and side objects, its status follows the JobSet, and
suspend, resume, the active deadline and a missing or changed runtime do what a user
of Kubeflow Trainer sees. The real JobSet controller runs in
tests/kubernetes/trainjob/test_operator.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from testkit.fake_api import FakeApi
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.transport.resources import (
    CLUSTER_TRAINING_RUNTIMES,
    EVENTS,
    JOBSETS,
    TRAINJOBS,
    Resource,
)

NS = "default"
CONFIGMAPS = Resource("", "v1", "configmaps")
SECRETS = Resource("", "v1", "secrets")
OPTIONS = OperatorOptions(
    namespace=NS, metrics_port=-1, health_port=-1, kinds=("TrainJob",), workers=2
)
IMAGE = "registry.example/torch:2"


def torch_runtime(name: str = "torch", image: str = IMAGE) -> dict[str, Any]:
    """A ClusterTrainingRuntime like Trainer's torch-distributed, smaller."""
    container = {"name": "node", "image": image, "command": ["torchrun", "train.py"]}
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [job]}},
        },
    }


def mpi_runtime(name: str = "mpi") -> dict[str, Any]:
    """An OpenMPI runtime whose launcher is also a node (as deepspeed-distributed)."""

    def job(role: str, step: str) -> dict[str, Any]:
        container = {"name": "node", "image": "registry.example/mpi:1"}
        return {
            "name": role,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {"template": {"spec": {"containers": [container]}}},
            },
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {
                "numNodes": 2,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": True,
                },
            },
            "template": {
                "spec": {"replicatedJobs": [job("launcher", "trainer"), job("node", "trainer")]}
            },
        },
    }


def trainjob(name: str = "tj", runtime: str = "torch", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def new_api() -> FakeApi:
    api = FakeApi()
    api.add_namespace("")  # cluster-scoped objects
    return api


@asynccontextmanager
async def serving(api: FakeApi, options: OperatorOptions = OPTIONS) -> AsyncIterator[Operator]:
    """The operator running in-process on `api`, caches synced, until the block ends."""
    operator = Operator(options, api.client())  # type: ignore[arg-type]
    stop = asyncio.Event()
    running = asyncio.create_task(operator.run(stop))
    await until(lambda: operator.synced() or running.done(), "caches synced")
    assert not running.done(), "the operator stopped"
    try:
        yield operator
    finally:
        stop.set()
        assert await asyncio.wait_for(running, 30) == 0


async def until(check: Callable[[], Any], what: str, seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within {seconds}s: {what}")


def condition(api: FakeApi, name: str, kind: str) -> dict[str, Any] | None:
    stored = api.object(TRAINJOBS, NS, name) or {}
    conditions = (stored.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def true(api: FakeApi, name: str, kind: str) -> dict[str, Any] | None:
    found = condition(api, name, kind)
    return found if found is not None and found["status"] == "True" else None


def set_jobset_status(api: FakeApi, name: str, status: dict[str, Any]) -> None:
    """What JobSet's controller would write."""
    api.update(JOBSETS, NS, name, {"metadata": {"name": name}, "status": status}, "status")


def node_image(jobset: dict[str, Any]) -> str:
    job = jobset["spec"]["replicatedJobs"][0]
    return str(job["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_a_trainjob_becomes_its_jobset_and_follows_its_status() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    async with serving(api) as operator:
        api.create(TRAINJOBS, NS, trainjob(), dry_run=False)
        jobset = await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
        owner = jobset["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "tj", True)
        assert owner["uid"] == api.object(TRAINJOBS, NS, "tj")["metadata"]["uid"]  # type: ignore[index]
        assert node_image(jobset) == IMAGE
        snapshot = api.object(CONFIGMAPS, NS, "tj-runtime-snapshot")
        assert snapshot is not None and "name: torch" in snapshot["data"]["runtime"]
        applies = [r for r in api.of("apply") if r.resource == str(JOBSETS)]
        assert applies and all(
            r.params == {"fieldManager": "trainer", "force": True} for r in api.of("apply")
        )
        set_jobset_status(
            api,
            "tj",
            {
                "replicatedJobsStatus": [{"name": "node", "ready": 1, "active": 1}],
            },
        )
        await until(
            lambda: (api.object(TRAINJOBS, NS, "tj") or {}).get("status", {}).get("jobsStatus"),
            "jobsStatus from the JobSet",
        )
        status = api.object(TRAINJOBS, NS, "tj")["status"]  # type: ignore[index]
        assert status["jobsStatus"][0]["name"] == "node"
        assert status["jobsStatus"][0]["ready"] == 1
        done = {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": "2026-12-05T10:00:00Z",
        }
        set_jobset_status(api, "tj", {"conditions": [done], "terminalState": "Completed"})
        complete = await until(lambda: true(api, "tj", "Complete"), "Complete")
        assert complete["message"] == "jobset completed successfully"
        # Created while the operator runs, the TrainJob had no snapshot to read; the
        # one its first pass applied is remembered: no pass reads it.
        reads = [r for r in api.of("get", CONFIGMAPS) if r.name == "tj-runtime-snapshot"]
        assert reads == []
        # Its own controller's metrics, under Trainer's controller name.
        reconciles = operator.metrics.registry.get_sample_value(
            "controller_runtime_reconcile_total",
            {"controller": "trainjob_controller", "result": "success"},
        )
        assert reconciles is not None and reconciles >= 3


async def test_an_mpi_trainjob_gets_its_secret_once_and_its_hostfile() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", mpi_runtime(), dry_run=False)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob(runtime="mpi"), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
        secret = api.object(SECRETS, NS, "tj-mpi-ssh-auth")
        assert secret is not None and secret["type"] == "kubernetes.io/ssh-auth"
        assert secret["metadata"]["ownerReferences"][0]["name"] == "tj"
        hostfile = api.object(CONFIGMAPS, NS, "tj-mpi-hostfile")
        assert hostfile is not None and "slots=1" in hostfile["data"]["hostfile"]
        for round_ in range(3):  # JobSet changes: more passes
            set_jobset_status(
                api, "tj", {"replicatedJobsStatus": [{"name": "node", "ready": round_}]}
            )
            await asyncio.sleep(0.1)
        assert len([r for r in api.of("create", SECRETS)]) == 1
        assert not [r for r in api.requests if r.resource == "secrets" and r.verb != "create"]


async def test_a_restarted_operator_keeps_the_mpi_secret_it_made() -> None:
    """The Secret is immutable and never read: a new operator process meets
    AlreadyExists once, keeps the Secret, and makes nothing twice."""
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", mpi_runtime(), dry_run=False)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob(runtime="mpi"), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
    secret = api.object(SECRETS, NS, "tj-mpi-ssh-auth")
    jobset = api.object(JOBSETS, NS, "tj")
    async with serving(api):
        set_jobset_status(api, "tj", {"replicatedJobsStatus": [{"name": "node", "ready": 1}]})
        await until(
            lambda: (api.object(TRAINJOBS, NS, "tj") or {}).get("status", {}).get("jobsStatus"),
            "the new operator's pass",
        )
        await asyncio.sleep(0.2)
    creates = api.of("create", SECRETS)
    assert [r.error is None for r in creates] == [True, False]  # made, then AlreadyExists
    assert api.object(SECRETS, NS, "tj-mpi-ssh-auth") == secret
    assert api.object(JOBSETS, NS, "tj")["spec"] == jobset["spec"]  # type: ignore[index]
    # The new process found the TrainJob listed, not created: it read the snapshot
    # the first process made, once.
    reads = [r for r in api.of("get", CONFIGMAPS) if r.name == "tj-runtime-snapshot"]
    assert [r.error is None for r in reads] == [True]


async def test_suspend_then_resume() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob(suspend=True), dry_run=False)
        jobset = await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
        assert jobset["spec"]["suspend"] is True
        suspended = await until(lambda: true(api, "tj", "Suspended"), "Suspended")
        assert suspended["reason"] == "Suspended"
        api.patch(TRAINJOBS, NS, "tj", {"spec": {"suspend": False}}, "")
        await until(
            lambda: (api.object(JOBSETS, NS, "tj") or {})["spec"].get("suspend") is False,
            "the JobSet resumed",
        )
        resumed = await until(
            lambda: (c := condition(api, "tj", "Suspended")) and c["status"] == "False" and c,
            "Suspended=False",
        )
        assert resumed["reason"] == "Resumed"


async def test_the_active_deadline_deletes_the_jobset() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob(activeDeadlineSeconds=1), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
        failed = await until(lambda: true(api, "tj", "Failed"), "Failed", seconds=15)
        assert failed["reason"] == "DeadlineExceeded"
        assert api.object(JOBSETS, NS, "tj") is None
        assert [r.name for r in api.of("delete", JOBSETS)] == ["tj"]
        # Its last word first: the Failed status is stored before the JobSet goes.
        order = [
            (r.verb, r.resource)
            for r in api.requests
            if (r.verb, r.resource) == ("delete", str(JOBSETS))
            or (r.subresource == "status" and "DeadlineExceeded" in str(r.body))
        ]
        assert order[:2] == [("update", str(TRAINJOBS)), ("delete", str(JOBSETS))]


async def test_a_missing_runtime_fails_the_trainjob_until_it_exists() -> None:
    api = new_api()
    async with serving(api) as operator:
        api.create(TRAINJOBS, NS, trainjob(runtime="later"), dry_run=False)
        failed = await until(lambda: true(api, "tj", "Failed"), "Failed")
        assert failed["reason"] == "TrainingRuntimeNotFound"
        assert 'ClusterTrainingRuntime.trainer.kubeflow.org "later" not found' in failed["message"]
        assert api.object(JOBSETS, NS, "tj") is None
        await operator.recorder.flush(5)
        warnings = [
            e
            for e in api.objects(EVENTS, NS)
            if e["type"] == "Warning" and e["involvedObject"]["kind"] == "TrainJob"
        ]
        assert [e["reason"] for e in warnings] == ["TrainJobResourcesCreationFailed"]
        assert warnings[0]["source"]["component"] == "trainer-trainjob-controller"
        # The runtime made later: the waiting TrainJob goes on, with no event of its own.
        api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime("later"), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet once the runtime exists")
        await until(lambda: condition(api, "tj", "Failed") is None, "Failed dropped")


async def test_a_runtime_change_reaches_a_suspended_trainjob() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob(suspend=True), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "tj"), "the JobSet")
        changed = torch_runtime(image="registry.example/torch:3")
        stored = api.object(CLUSTER_TRAINING_RUNTIMES, "", "torch")
        assert stored is not None
        api.update(
            CLUSTER_TRAINING_RUNTIMES, "", "torch", {**changed, "metadata": stored["metadata"]}, ""
        )
        await until(
            lambda: node_image(api.object(JOBSETS, NS, "tj") or {}) == "registry.example/torch:3",
            "the JobSet from the changed runtime",
        )
        snapshot = api.object(CONFIGMAPS, NS, "tj-runtime-snapshot")
        assert snapshot is not None and "torch:3" in snapshot["data"]["runtime"]


async def test_every_write_goes_through_the_write_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every object write the operator sends is one the write path (writes.py) or the
    status writer sent; the Event recorder's are Events."""
    from tfjob.runtimes.kubernetes.controller import status_writer, writes

    sent: list[tuple[str, str]] = []
    send, write_status = writes.Writer._send, status_writer.StatusWriter.write

    async def logged_send(self: Any, namespace: str, write: Any) -> Any:
        sent.append((str(write.resource), write.name))
        return await send(self, namespace, write)

    async def logged_status(self: Any, meta: Any, base: Any, status: Any) -> Any:
        sent.append(("trainjobs.trainer.kubeflow.org", meta.name))
        return await write_status(self, meta, base, status)

    monkeypatch.setattr(writes.Writer, "_send", logged_send)
    monkeypatch.setattr(status_writer.StatusWriter, "write", logged_status)
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", mpi_runtime(), dry_run=False)
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    before = len(api.requests)
    async with serving(api):
        api.create(TRAINJOBS, NS, trainjob("a", runtime="mpi"), dry_run=False)
        api.create(TRAINJOBS, NS, trainjob("b", activeDeadlineSeconds=1), dry_run=False)
        await until(lambda: true(api, "b", "Failed"), "b past its deadline", seconds=15)
        await until(lambda: api.object(JOBSETS, NS, "a"), "a's JobSet")
    writes_seen = [
        (r.resource, r.name)
        for r in api.requests[before:]
        if r.verb in ("create", "apply", "update", "patch", "delete") and r.resource != "events"
    ]
    assert {w[0] for w in writes_seen} >= {"jobsets.jobset.x-k8s.io", "secrets", "configmaps"}
    assert set(writes_seen) <= set(sent)
    assert len(writes_seen) == len(sent)


async def test_a_trainjob_of_another_manager_is_left_alone() -> None:
    api = new_api()
    api.create(CLUSTER_TRAINING_RUNTIMES, "", torch_runtime(), dry_run=False)
    async with serving(api):
        api.create(
            TRAINJOBS, NS, trainjob("theirs", managedBy="kueue.x-k8s.io/multikueue"), dry_run=False
        )
        api.create(TRAINJOBS, NS, trainjob("ours"), dry_run=False)
        await until(lambda: api.object(JOBSETS, NS, "ours"), "our JobSet")
        await asyncio.sleep(0.2)
        assert api.object(JOBSETS, NS, "theirs") is None
        assert "status" not in (api.object(TRAINJOBS, NS, "theirs") or {})
