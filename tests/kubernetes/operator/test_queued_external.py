"""`--kueue-integration=external` end to end on the in-memory API (testkit/fake_api.py):
the whole operator in-process makes and keeps a queued TFJob's Kueue Workload, and
the test plays Kueue (it admits and evicts by writing the Workload's status) and the
kubelet (pod phases).

What the runtime must do (core/queued.py decides): cache the Workloads, flavors and
priority classes, pass them to the core, patch the job's suspend conditionally, write
the Workload's status, render the pods from the admitted replica specs; in builtin
mode none of it (no Workload, no new stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from testkit.fake_api import FakeApi
from testkit.helpers import tfjob, until
from testkit.operators import replica
from tfjob.core.queueing import workload_manifest
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.tensorflow import TENSORFLOW, TFJob
from tfjob.runtimes.kubernetes.cache.kueue import RESOURCE_FLAVORS, WORKLOADS
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.transport.resources import PODS, SERVICES, jobs_of

TFJOBS = jobs_of(TENSORFLOW)
NS = "default"
QUEUE = {"kueue.x-k8s.io/queue-name": "training"}
SINCE = "2026-01-01T00:00:00Z"
FINALIZER = "kueue.x-k8s.io/resource-in-use"


def _options(integration: str) -> OperatorOptions:
    return OperatorOptions(
        namespace=NS,
        metrics_port=-1,
        health_port=-1,
        kinds=("TFJob",),
        kueue_integration=integration,  # type: ignore[arg-type]
    )


async def _running(api: FakeApi, integration: str) -> AsyncIterator[Operator]:
    operator = Operator(_options(integration), api.client())  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(operator.run(stop))
    await until(lambda: operator.synced() or task.done())
    assert not task.done(), task.result()
    yield operator
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0


@pytest.fixture
def api() -> FakeApi:
    served = FakeApi()
    served.add_namespace("")  # where the fake keeps cluster-scoped objects
    flavor = {"metadata": {"name": "spot"}, "spec": {"nodeLabels": {"pool": "spot"}}}
    served.create(RESOURCE_FLAVORS, "", flavor, dry_run=False)
    return served


@pytest.fixture
async def external(api: FakeApi) -> AsyncIterator[Operator]:
    async for operator in _running(api, "external"):
        yield operator


def _submit(api: FakeApi, name: str, *, workers: int = 2) -> None:
    manifest = tfjob(name, NS, {"Worker": replica(workers)}, runPolicy={"suspend": False})
    manifest["metadata"]["labels"] = dict(QUEUE)
    api.create(TFJOBS, NS, manifest, dry_run=False)


def _job(api: FakeApi, name: str) -> dict[str, Any]:
    found = api.object(TFJOBS, NS, name)
    assert found is not None
    return found


def _suspended(api: FakeApi, name: str) -> bool:
    return bool(_job(api, name)["spec"].get("runPolicy", {}).get("suspend"))


def _workloads(api: FakeApi) -> list[dict[str, Any]]:
    return api.objects(WORKLOADS, NS)


def _workload(api: FakeApi) -> dict[str, Any]:
    [found] = _workloads(api)
    return found


def _conditions(workload: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (workload.get("status") or {}).get("conditions", [])}


def _condition(kind: str, status: str = "True", reason: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason or kind, "message": kind}


def _set_status(api: FakeApi, workload: dict[str, Any], status: dict[str, Any]) -> None:
    """Kueue's write: the Workload's status replaced, as its controllers PUT it."""
    name = workload["metadata"]["name"]
    api.update(WORKLOADS, NS, name, {**workload, "status": status}, "status")


def _admit(api: FakeApi) -> None:
    """Kueue admits the Workload in ClusterQueue cq on flavor spot (and holds it with
    its finalizer, as Kueue's controller adds it)."""
    workload = _workload(api)
    workload["metadata"]["finalizers"] = [FINALIZER]
    api.update(WORKLOADS, NS, workload["metadata"]["name"], workload, "")
    workload = _workload(api)
    assignments = [
        {"name": ps["name"], "flavors": {"cpu": "spot"}, "count": ps["count"]}
        for ps in workload["spec"]["podSets"]
    ]
    status = {
        "conditions": [_condition("QuotaReserved"), _condition("Admitted")],
        "admission": {"clusterQueue": "cq", "podSetAssignments": assignments},
    }
    _set_status(api, workload, status)


def _spec(patch: dict[str, Any]) -> str:
    return f"suspend: {patch['spec']['runPolicy']['suspend']}"


def _pods(api: FakeApi) -> list[dict[str, Any]]:
    return api.objects(PODS, NS)


def _set_phase(api: FakeApi, pod: dict[str, Any], phase: str) -> None:
    name = pod["metadata"]["name"]
    state = {"terminated": {"exitCode": 0}} if phase == "Succeeded" else {"running": {}}
    status = {
        "phase": phase,
        "containerStatuses": [{"name": "tensorflow", "state": state, "restartCount": 0}],
    }
    api.update(PODS, NS, name, {**pod, "status": status}, "status")


async def test_a_queued_job_is_suspended_and_gets_a_workload_but_no_pod(
    api: FakeApi, external: Operator
) -> None:
    _submit(api, "queued")
    await until(lambda: _suspended(api, "queued") and len(_workloads(api)) == 1)
    workload = _workload(api)
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TFJob", "queued", True)
    assert workload["spec"]["queueName"] == "training"
    assert [ps["count"] for ps in workload["spec"]["podSets"]] == [2]
    await asyncio.sleep(0.2)  # time for a wrong pod
    assert _pods(api) == []
    patches = [r for r in api.requests if r.verb == "patch" and r.resource == str(TFJOBS)]
    assert patches[0].body is not None
    assert patches[0].body["spec"] == {"runPolicy": {"suspend": True}}
    assert patches[0].body["metadata"]["resourceVersion"]  # conditional on the job read


async def test_an_admitted_job_runs_on_its_flavor_then_finishes_its_workload(
    api: FakeApi, external: Operator
) -> None:
    _submit(api, "admitted")
    await until(lambda: _suspended(api, "admitted") and len(_workloads(api)) == 1)
    _admit(api)
    await until(lambda: not _suspended(api, "admitted") and len(_pods(api)) == 2)
    for pod in _pods(api):
        assert pod["spec"]["nodeSelector"] == {"pool": "spot"}
    for pod in _pods(api):
        _set_phase(api, pod, "Succeeded")
    await until(lambda: _conditions(_workload(api)).get("Finished") == "True")
    await until(lambda: FINALIZER not in (_workload(api)["metadata"].get("finalizers") or []))


async def test_an_evicted_job_is_emptied_suspended_and_gives_its_quota_back(
    api: FakeApi, external: Operator
) -> None:
    _submit(api, "evicted")
    await until(lambda: len(_workloads(api)) == 1)
    _admit(api)
    await until(lambda: len(_pods(api)) == 2 and len(api.objects(SERVICES, NS)) == 2)
    workload = _workload(api)
    status = dict(workload["status"])
    status["conditions"] = [*status["conditions"], _condition("Evicted", reason="Preempted")]
    _set_status(api, workload, status)
    await until(lambda: _suspended(api, "evicted"))
    await until(lambda: _pods(api) == [] and api.objects(SERVICES, NS) == [])
    deleted = {r.resource for r in api.requests if r.verb == "delete"}
    assert {"pods", "services"} <= deleted  # by the operator (no node ran them)
    await until(lambda: _conditions(_workload(api)).get("QuotaReserved") == "False")
    assert "admission" not in _workload(api)["status"]


async def test_builtin_mode_makes_no_workload_and_watches_nothing_new(api: FakeApi) -> None:
    async for _operator in _running(api, "builtin"):
        _submit(api, "plain")
        await until(lambda: len(_pods(api)) == 2)
        assert _workloads(api) == []
        assert not _suspended(api, "plain")
    watched = {r.resource for r in api.requests if r.verb == "watch"}
    assert watched == {str(TFJOBS), "pods", "services"}


async def test_external_mode_watches_the_workloads_and_what_they_name(
    api: FakeApi, external: Operator
) -> None:
    watched = {r.resource for r in api.requests if r.verb == "watch"}
    kueue = {"workloads", "resourceflavors", "workloadpriorityclasses"}
    assert watched == {str(TFJOBS), "pods", "services", "priorityclasses.scheduling.k8s.io"} | {
        f"{plural}.kueue.x-k8s.io" for plural in kueue
    }


async def test_without_kueue_the_external_operator_exits_naming_the_fix() -> None:
    api = FakeApi(served=[PODS, SERVICES, TFJOBS])
    operator = Operator(_options("external"), api.client())  # type: ignore[arg-type]
    assert await asyncio.wait_for(operator.run(asyncio.Event()), 10) == 1


async def test_a_workload_whose_job_is_gone_is_finished_and_let_go(
    api: FakeApi, external: Operator
) -> None:
    """The fake has no garbage collector: the Workload outlives its job, as it does
    on a cluster while the collector is slow or its finalizer holds it."""
    _submit(api, "gone")
    await until(lambda: len(_workloads(api)) == 1)
    _admit(api)
    await until(lambda: len(_pods(api)) == 2)
    api.delete(TFJOBS, NS, "gone")
    await until(lambda: _conditions(_workload(api)).get("Finished") == "True")
    [finished] = [c for c in _workload(api)["status"]["conditions"] if c["type"] == "Finished"]
    assert finished["reason"] == "OwnerNotFound"
    await until(lambda: not _workload(api)["metadata"].get("finalizers"))


async def test_a_refused_suspend_ends_the_plan_and_the_job_is_tried_again(
    api: FakeApi, external: Operator
) -> None:
    """Admitted, the plan starts the job (SetSuspend false first) and creates its pods;
    the patch refused (409: the job changed), no pod is made from that plan, and the
    retry starts the job."""
    _submit(api, "raced")
    await until(lambda: _suspended(api, "raced") and len(_workloads(api)) == 1)
    api.fail(409, verb="patch", resource=TFJOBS, name="raced")
    _admit(api)
    await until(lambda: not _suspended(api, "raced") and len(_pods(api)) == 2)
    starts = [r for r in api.of("patch", TFJOBS) if r.body and "suspend: False" in _spec(r.body)]
    refused, start = starts[0], starts[-1]
    assert refused is not start
    first_pod = next(r for r in api.of("create", PODS) if not r.dry_run)
    assert api.requests.index(first_pod) > api.requests.index(start)


async def test_a_multikueue_workers_copy_takes_the_prebuilt_workload_it_names(
    api: FakeApi, external: Operator
) -> None:
    """The copy names a Workload MultiKueue makes there with no owner, maybe after
    the job: the operator waits for it (none of its own), takes it and runs the job
    under it once it is admitted."""
    name = "tfjob-copy-from-manager"
    manifest = tfjob("copy", NS, {"Worker": replica(2)}, runPolicy={"suspend": True})
    manifest["metadata"]["labels"] = dict(QUEUE)
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": name}
    api.create(TFJOBS, NS, manifest, dry_run=False)
    await asyncio.sleep(0.5)  # time for a wrong Workload
    assert _workloads(api) == [] and _pods(api) == []

    prebuilt = workload_manifest(decode_job(_job(api, "copy"), TFJob), priority=None)
    prebuilt["metadata"] = {"name": name, "namespace": NS}  # no owner, as MultiKueue's
    api.create(WORKLOADS, NS, prebuilt, dry_run=False)
    uid = _job(api, "copy")["metadata"]["uid"]

    def taken() -> bool:
        refs = _workload(api)["metadata"].get("ownerReferences") or []
        return [(r["uid"], r.get("controller")) for r in refs] == [(uid, True)]

    await until(taken, within=5)
    _admit(api)
    await until(lambda: not _suspended(api, "copy") and len(_pods(api)) == 2)
    assert [w["metadata"]["name"] for w in _workloads(api)] == [name]
