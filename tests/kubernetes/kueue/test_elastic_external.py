"""Elastic PyTorchJobs under quota: Kueue v0.19.0's partial admission, with tfjob
making the Workloads (``--kueue-integration=external``).

Kueue's own Kubeflow v1 integration never asks for partial admission. tfjob's
Workload gives an elastic PyTorchJob's Worker podSet a ``minCount`` (its
``elasticPolicy.minReplicas``), so Kueue's scheduler (PartialAdmission, beta and on
by default since v0.5) may admit fewer Workers than the job lists when the quota
has no room for all of them. tfjob then runs the admitted Workers only, and their
env and services say so. A job without an elasticPolicy asks for all or nothing:
on the same quota it waits, suspended. Kueue's scheduler and webhooks are the real
ones; kwok nodes and the real kube-scheduler run the pods.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.kueue import QueuedJobs, Queues, workload_condition
from testkit.operators import Operators

#: The conftest's ``kueue`` fixture: the kinds as Kueue's external frameworks.
KUEUE_EXTERNAL = True
EXTERNAL = "--kueue-integration=external"
#: The elastic kind; its plain form stands for every all-or-nothing job.
KIND = "PyTorchJob"


@pytest.fixture(params=[KIND])
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _true(queued: QueuedJobs, name: str, kind: str) -> bool:
    found = workload_condition(queued.workload(name), kind)
    return found is not None and found["status"] == "True"


def _job(
    queued: QueuedJobs, name: str, queue: str, *, master: bool, elastic: bool
) -> dict[str, Any]:
    """`name` with 4 Workers of 1 CPU (and a Master of 1 CPU with `master`); with
    `elastic`, elasticPolicy minReplicas 2, maxReplicas 4."""
    manifest = queued.manifest(name, 5, queue=queue)  # a Master and 4 Workers
    specs = manifest["spec"][queued.framework.spec_field]
    if not master:
        del specs["Master"]
    if elastic:
        manifest["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}
    manifest["spec"]["runPolicy"] = {"suspend": False}
    return queued.submit(manifest)


def _env(pod: dict[str, Any]) -> dict[str, str]:
    [container] = pod["spec"]["containers"]
    return {v["name"]: v.get("value", "") for v in container.get("env") or []}


@pytest.mark.parametrize("master", [True, False], ids=["master", "workers-only"])
def test_an_elastic_job_is_admitted_in_part_and_runs_the_admitted_workers(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes, master: bool
) -> None:
    """Quota for 2 Workers (and the Master): Kueue admits 2 of the 4 Workers, tfjob
    runs exactly those, tells them so, and the job succeeds."""
    nodes.add(2, cpu="4")  # room for the whole job: only Kueue's quota holds Workers back
    queue = queues.queue(cpu="3" if master else "2")
    operators.start(EXTERNAL)

    _job(queued, "elastic", queue, master=master, elastic=True)
    wait_for(lambda: _true(queued, "elastic", "Admitted"), message="Kueue to admit elastic")
    workload = queued.workload("elastic")
    assert workload is not None
    asked = {ps["name"]: (ps["count"], ps.get("minCount")) for ps in workload["spec"]["podSets"]}
    assert asked == ({"master": (1, None)} if master else {}) | {"worker": (4, 2)}, asked
    given = {a["name"]: a["count"] for a in workload["status"]["admission"]["podSetAssignments"]}
    assert given == ({"master": 1} if master else {}) | {"worker": 2}, given

    pods = queued.running_pods("elastic", 3 if master else 2)
    workers = ["elastic-worker-0", "elastic-worker-1"]
    expected = (["elastic-master-0"] if master else []) + workers
    assert sorted(pods) == sorted(expected)
    # Pods and services go out together: a pod may run before its service is made.
    wait_for(
        lambda: sorted(queued.services("elastic")) == sorted(expected),
        10,
        message=f"services {expected}",
    )
    for name, pod in pods.items():
        env = _env(pod)
        # torchrun's rendezvous takes any count from minReplicas to maxReplicas.
        assert env["PET_NNODES"] == "2:4", (name, env)
        assert env["PET_RDZV_ENDPOINT"] == "elastic-worker-0:23456", (name, env)
        if master:  # the Master and the 2 admitted Workers, not the 4 asked for
            assert env["WORLD_SIZE"] == "3", (name, env)
            assert env["MASTER_ADDR"] == "elastic-master-0", (name, env)
        else:  # upstream gives a Master-less job no WORLD_SIZE or RANK
            assert "WORLD_SIZE" not in env and "RANK" not in env, (name, env)
    if master:
        assert _env(pods["elastic-worker-1"])["RANK"] == "2"
    assert not queued.suspended("elastic")
    stored = queued.get("elastic")["spec"][queued.framework.spec_field]
    assert stored["Worker"]["replicas"] == 4  # the job is kept as written
    wait_for(lambda: _true(queued, "elastic", "PodsReady"), message="PodsReady on elastic")

    queued.end_pods("elastic")
    queued.wait_condition("elastic", "Succeeded")
    wait_for(lambda: _true(queued, "elastic", "Finished"), message="elastic's Workload Finished")
    assert len(queued.pods("elastic")) == len(expected)  # no Worker beyond the admitted


def test_a_plain_job_of_the_same_size_waits_whole_and_is_never_admitted_in_part(
    queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """Without an elasticPolicy the Workers are all or nothing: on quota for the
    Master and 2 Workers the job waits, suspended, with no pod or service."""
    nodes.add(2, cpu="4")
    queue = queues.queue(cpu="3")
    operators.start(EXTERNAL)

    _job(queued, "plain", queue, master=True, elastic=False)
    verdict = wait_for(lambda: queued.pending_for_quota("plain"), message="Kueue to hold plain")
    assert "insufficient" in verdict["message"], verdict
    workload = queued.workload("plain")
    assert workload is not None
    assert all("minCount" not in ps for ps in workload["spec"]["podSets"]), workload["spec"]
    assert "admission" not in (workload.get("status") or {}), workload["status"]
    assert queued.suspended("plain")
    assert queued.pods("plain") == {}
    assert queued.services("plain") == {}
    assert not _true(queued, "plain", "Admitted")
