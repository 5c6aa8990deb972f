"""examples/kueue/ as docs/queueing.md has a user apply it: with kubectl, on Kueue."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.cluster import Nodes
from testkit.controlplane import REPO_ROOT, ControlPlane
from testkit.kueue import Kueue, QueuedJobs, workload_condition
from testkit.operators import Operators

EXAMPLES = REPO_ROOT / "examples" / "kueue"


def _kubectl(plane: ControlPlane, namespace: str, *args: str) -> str:
    """kubectl as the admin, its discovery cache in the control plane's folder."""
    assert plane.workdir is not None
    done = subprocess.run(
        [str(plane.assets.tool("kubectl")), f"--kubeconfig={plane.kubeconfig_path}",
         f"--cache-dir={plane.workdir / 'kubectl-cache'}", f"--namespace={namespace}", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def example_queues(kueue: Kueue, control_plane: ControlPlane, namespace: str) -> Iterator[Path]:
    """queues.yaml applied in the test's namespace; its cluster-wide objects deleted after."""
    queues = EXAMPLES / "queues.yaml"
    _kubectl(control_plane, namespace, "apply", "--server-side", "-f", str(queues))
    yield queues
    _kubectl(control_plane, namespace, "delete", "--wait=false", "--ignore-not-found", "-f",
             str(queues))  # fmt: skip


def test_the_queued_example_waits_for_its_queue_then_runs_to_success(
    example_queues: Path,
    operators: Operators,
    nodes: Nodes,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    nodes.add(1, cpu="4")
    operators.start()
    queued = QueuedJobs(control_plane, namespace, "TFJob")
    _kubectl(control_plane, namespace, "wait", "--for=condition=Active", "--timeout=30s",
             "clusterqueue/team-a")  # fmt: skip
    _kubectl(control_plane, namespace, "apply", "--server-side", "-f", str(EXAMPLES / "tfjob.yaml"))

    queued.running_pods("queued-mnist", 2)
    workload = queued.workload("queued-mnist")
    admitted = workload_condition(workload, "Admitted")
    assert admitted is not None and admitted["status"] == "True", workload
    assert workload is not None and workload["spec"]["priorityClassRef"]["name"] == "low", workload
    flavors = {
        flavor
        for assignment in workload["status"]["admission"]["podSetAssignments"]
        for flavor in assignment["flavors"].values()
    }
    assert flavors == {"default-flavor"}
    queued.end_pods("queued-mnist")
    queued.wait_condition("queued-mnist", "Succeeded")
