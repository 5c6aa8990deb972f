"""Both Kueue modes under a real Kueue with a short waitForPodsReady.

In external mode PodsReady is tfjob's to keep on the job's Workload (it follows the
job's Running condition); in builtin mode Kueue's integration reads it from the
job's status. Either way Kueue evicts an admitted Workload that is not PodsReady
within ``waitForPodsReady.timeout`` (reason PodsReadyTimeout) and requeues it after a
backoff (``status.requeueState``). A module of its own: the short timeout would evict
the jobs other tests keep waiting on purpose (a gang the nodes cannot place yet).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster import Nodes
from testkit.helpers import wait_for
from testkit.kueue import Kueue, QueuedJobs, Queues, workload_condition
from testkit.operators import Operators

KUEUE_EXTERNAL = True
KUEUE_KINDS = ("TFJob",)
TIMEOUT_SECONDS = 5
#: Evicted after TIMEOUT_SECONDS unready; requeued about a second later (a
#: backoff base of 1 s, at most 2 s), not Kueue's default minute.
KUEUE_WAIT_FOR_PODS_READY = {
    "timeout": f"{TIMEOUT_SECONDS}s",
    "requeuingStrategy": {"backoffBaseSeconds": 1, "backoffMaxSeconds": 2},
}
POOL_LABEL = "tfjob.test/pool"
EXTERNAL = "--kueue-integration=external"


def _condition(queued: QueuedJobs, name: str, kind: str) -> dict[str, Any] | None:
    return workload_condition(queued.workload(name), kind)


def _true(queued: QueuedJobs, name: str, kind: str) -> bool:
    found = _condition(queued, name, kind)
    return found is not None and found["status"] == "True"


@pytest.fixture(params=[True, False], ids=["external", "builtin"])
def mode(request: pytest.FixtureRequest, kueue: Kueue) -> Iterator[tuple[str, ...]]:
    """The operator's flags for the mode, with the module's Kueue in that mode (and
    back in its own after the test)."""
    external: bool = request.param
    if kueue.external != external:
        kueue.restart(external=external)
    yield (EXTERNAL,) if external else ()
    if kueue.external != KUEUE_EXTERNAL:
        kueue.restart(external=KUEUE_EXTERNAL)


@pytest.mark.parametrize("kind", ["TFJob"])
def test_a_job_whose_pods_never_get_ready_is_evicted_and_requeued_a_ready_one_is_not(
    mode: tuple[str, ...], queued: QueuedJobs, queues: Queues, operators: Operators, nodes: Nodes
) -> None:
    """Two admitted jobs: one's flavour names nodes that do not exist, so its pods
    stay Pending; the other's pods run. After the timeout Kueue evicts the first
    (PodsReadyTimeout): tfjob suspends it and deletes its pods, Kueue counts the
    requeue and admits it again, and tfjob makes its pods again. The second keeps
    PodsReady True and runs on, untouched."""
    nodes.add(1, cpu="4", labels={POOL_LABEL: "real"})
    real = queues.queue(cpu="4", flavor=queues.flavor("real", nodeLabels={POOL_LABEL: "real"}))
    nowhere = queues.flavor("nowhere", nodeLabels={POOL_LABEL: "nowhere"})
    stuck_cq = queues.cluster_queue(cpu="4", flavor=nowhere)
    queues.wait_active(stuck_cq)
    stuck = queues.local_queue(stuck_cq, name="stuck")
    operators.start(*mode)

    queued.create("ready", 2, queue=real, run_policy={"suspend": False})
    queued.create("stuck", 2, queue=stuck, run_policy={"suspend": False})
    queued.running_pods("ready", 2)
    wait_for(lambda: _true(queued, "ready", "PodsReady"), message="PodsReady on ready")
    wait_for(lambda: len(queued.pods("stuck")) == 2, message="stuck's pods made")
    waiting = _condition(queued, "stuck", "PodsReady")
    assert waiting is not None and waiting["status"] == "False", waiting
    assert waiting["reason"] == "WaitForStart", waiting

    evicted = wait_for(
        lambda: (found := _condition(queued, "stuck", "Evicted")) and found["status"] == "True"
        and found,
        timeout=TIMEOUT_SECONDS + 15,
        message="Kueue to evict stuck",
    )  # fmt: skip
    assert evicted["reason"] == "PodsReadyTimeout", evicted
    wait_for(lambda: queued.suspended("stuck"), timeout=10, message="tfjob to suspend stuck")
    wait_for(lambda: queued.pods("stuck") == {}, timeout=10, message="stuck's pods deleted")
    queued.wait_condition("stuck", "Suspended", timeout=10)

    def requeued() -> dict[str, Any] | None:
        workload = queued.workload("stuck") or {}
        state = (workload.get("status") or {}).get("requeueState") or {}
        return state if state.get("count", 0) >= 1 else None

    state = wait_for(requeued, timeout=20, message="Kueue to count stuck's requeue")
    assert state["count"] == 1, state
    wait_for(lambda: not queued.suspended("stuck"), timeout=30, message="stuck re-admitted")
    assert _true(queued, "stuck", "Admitted")
    wait_for(lambda: len(queued.pods("stuck")) == 2, timeout=10, message="stuck's pods again")

    # Long past the timeout since it was admitted: the ready job was never evicted.
    assert not _true(queued, "ready", "Evicted")
    assert not queued.suspended("ready")
    assert _true(queued, "ready", "PodsReady")
    assert len(queued.running_pods("ready", 2)) == 2
    assert (queued.get("ready")["status"].get("restartCount") or 0) == 0
    queued.end_pods("ready")
    queued.wait_condition("ready", "Succeeded")
