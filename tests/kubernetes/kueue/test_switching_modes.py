"""Moving between Kueue's built-in Kubeflow integration and tfjob's own Workloads
(``--kueue-integration=external``) while jobs run and wait, under the real Kueue.

The move docs/queueing.md describes: stop the operator, restart Kueue with the kinds
moved between ``integrations.frameworks`` and ``externalFrameworks``, start the
operator in the other mode. Each job keeps its one Workload (the same object: the
new owner of the Workloads adopts them, it makes none), a running job keeps its pods
and runs to the end, a waiting job keeps its place and is admitted once the quota
is free. Both directions, on TFJob: the Workload's shape is the same code for every
kind (test_external.py and test_kueue.py run every kind in each mode).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.kueue import Kueue, QueuedJobs, Queues, workload_condition
from testkit.operators import Operators

#: The kind these tests queue.
KINDS = ("TFJob",)
EXTERNAL = "--kueue-integration=external"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def restored(kueue: Kueue) -> Iterator[Kueue]:
    """The module's Kueue, back in its own mode after the test."""
    external = kueue.external
    yield kueue
    if kueue.external != external:
        kueue.restart(external=external)


def _true(queued: QueuedJobs, name: str, kind: str) -> bool:
    found = workload_condition(queued.workload(name), kind)
    return found is not None and found["status"] == "True"


def _uids(objects: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: obj["metadata"]["uid"] for name, obj in objects.items()}


def _workload_uid(queued: QueuedJobs, name: str) -> str:
    workload = wait_for(lambda: queued.workload(name), message=f"{name}'s Workload")
    uid: str = workload["metadata"]["uid"]
    return uid


def _only_workload(queued: QueuedJobs, name: str, uid: str) -> None:
    """The job has one Workload, and it is still the one it had."""
    found = queued.workload(name)
    assert found is not None and found["metadata"]["uid"] == uid, found


@pytest.mark.parametrize(
    ("first", "then"),
    [(False, True), (True, False)],
    ids=["builtin-to-external", "external-to-builtin"],
)
def test_switching_modes_keeps_running_and_waiting_jobs(
    first: bool,
    then: bool,
    restored: Kueue,
    queued: QueuedJobs,
    queues: Queues,
    operators: Operators,
    nodes: Nodes,
) -> None:
    if restored.external != first:
        restored.restart(external=first)
    nodes.add(2, cpu="4")  # room for both jobs: only the quota holds one back
    queue = queues.queue(cpu="4")
    mode = (EXTERNAL,) if first else ()
    operator = operators.start(*mode)

    queued.create("running", 4, queue=queue)
    pods = _uids(queued.running_pods("running", 4))
    running_workload = _workload_uid(queued, "running")
    wait_for(lambda: _true(queued, "running", "PodsReady"), message="PodsReady on running")
    queued.create("waiting", 4, queue=queue)
    wait_for(lambda: queued.pending_for_quota("waiting"), message="Kueue to hold waiting")
    waiting_workload = _workload_uid(queued, "waiting")

    assert operator.stop() == 0
    restored.restart(external=then)
    operators.start(*((EXTERNAL,) if then else ()))

    # The new owner of the Workloads has taken them over: the waiting job's is still
    # pending (not replaced), and the running job still runs on its own pods.
    wait_for(lambda: queued.pending_for_quota("waiting"), message="waiting still pending")
    _only_workload(queued, "waiting", waiting_workload)
    assert queued.suspended("waiting") and queued.pods("waiting") == {}
    assert _uids(queued.running_pods("running", 4)) == pods
    _only_workload(queued, "running", running_workload)
    assert not queued.suspended("running")

    queued.end_pods("running")
    queued.wait_condition("running", "Succeeded")
    wait_for(lambda: _true(queued, "running", "Finished"), message="running's Workload Finished")
    _only_workload(queued, "running", running_workload)
    assert "restartCount" not in queued.get("running")["status"]

    wait_for(lambda: _true(queued, "waiting", "Admitted"), message="Kueue to admit waiting")
    _only_workload(queued, "waiting", waiting_workload)
    queued.running_pods("waiting", 4)
    queued.end_pods("waiting")
    queued.wait_condition("waiting", "Succeeded")
    wait_for(lambda: _true(queued, "waiting", "Finished"), message="waiting's Workload Finished")
