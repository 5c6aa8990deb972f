"""PyTorchJobs under `tfjob operator`, and their statuses beside Kubeflow's.

The same operator process that serves TFJobs creates a PyTorchJob's pods and services,
names the kind in its Events and metrics as upstream does, and decides its status by
PyTorchJob's rules. For the status, each scenario's pod outcomes (written by the
scripted kubelet, testkit/kubelet.py) are played once under Kubeflow's operator v1.9.4
(the real binary) and once under tfjob's, on the same API server: the conditions
(type, status, reason, message) and replica counts must be the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators
from testkit.training_operator import Kubeflow, stop
from tfjob.frameworks.pytorch import PYTORCH

IMAGE = "registry.example/torch:2"
SETTLE = 1.0  # reconciles' time for a late condition to show


def replica(count: int, restart_policy: str = "OnFailure", **extra: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": IMAGE}
    return {
        "replicas": count,
        "restartPolicy": restart_policy,
        "template": {"spec": {"containers": [container]}},
        **extra,
    }


@pytest.fixture
def pytorch(jobs: Jobs, pytorchjob_crd_installed: None) -> Jobs:
    return jobs.of(PYTORCH)


def test_a_pytorchjob_runs_to_succeeded_with_its_kind_named(
    operators: Operators, pytorch: Jobs, kubelet: FakeKubelet
) -> None:
    operator = operators.start()
    ns = pytorch.namespace
    pytorch.create("ddp", {"Master": replica(1), "Worker": replica(2)})
    names = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    pods = pytorch.wait_pods(names)
    assert set(pytorch.wait_services(names)) == names
    worker = pods["ddp-worker-0"]
    assert worker["metadata"]["labels"]["training.kubeflow.org/operator-name"] == (
        "pytorchjob-controller"
    )
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["init-pytorch"]
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert (env["MASTER_ADDR"], env["RANK"], env["WORLD_SIZE"]) == ("ddp-master-0", "1", "3")
    [owner] = worker["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["apiVersion"]) == ("PyTorchJob", "kubeflow.org/v1")

    for name in sorted(names):
        kubelet.run(ns, name)
    pytorch.wait_condition("ddp", "Running")
    kubelet.succeed(ns, "ddp-master-0", container="pytorch")
    done = pytorch.wait_condition("ddp", "Succeeded")
    assert done["reason"] == "PyTorchJobSucceeded"

    events = pytorch.events("ddp")
    assert {e["involvedObject"]["kind"] for e in events} == {"PyTorchJob"}
    assert {e["source"]["component"] for e in events} == {"pytorchjob-controller"}
    assert "SuccessfulCreatePod" in {e["reason"] for e in events}
    labels = {"framework": "pytorch", "job_namespace": ns}
    assert operator.metric("training_operator_jobs_successful_total", **labels) == 1
    assert operator.metric("training_operator_jobs_created_total", **labels) == 1
    assert (
        operator.metric(
            "controller_runtime_reconcile_total",
            controller="pytorchjob-controller",
            result="success",
        )
        >= 1
    )


# -- the same pod outcomes under both operators ------------------------------------------


@dataclass(frozen=True)
class Scenario:
    specs: dict[str, Any]
    play: Callable[[Jobs, FakeKubelet, str], None]  # (jobs, kubelet, job name)
    ends: str  # the condition the scenario ends with
    spec: dict[str, Any] | None = None


def _run_all(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    names = _pod_names(jobs, name)
    wait_for(lambda: names <= set(jobs.pods()), 30, message=f"the pods {sorted(names)}")
    for pod in sorted(names):
        kubelet.run(jobs.namespace, pod)
    jobs.wait_condition(name, "Running", timeout=30)


def _pod_names(jobs: Jobs, name: str) -> set[str]:
    job = jobs.get(name)
    assert job is not None
    return {
        f"{name}-{rtype.lower()}-{index}"
        for rtype, spec in job["spec"]["pytorchReplicaSpecs"].items()
        for index in range(spec.get("replicas", 1))
    }


def _succeed(*pods: str) -> Callable[[Jobs, FakeKubelet, str], None]:
    def play(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
        _run_all(jobs, kubelet, name)
        for pod in pods:
            kubelet.succeed(jobs.namespace, f"{name}-{pod}", container="pytorch")

    return play


def _fail_then_succeed(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    """Worker 0 is killed (137, retryable): replaced; then the Master succeeds."""
    _run_all(jobs, kubelet, name)
    worker = f"{name}-worker-0"
    first = jobs.pods()[worker]["metadata"]["uid"]
    kubelet.fail(jobs.namespace, worker, 137, container="pytorch")
    jobs.wait_condition(name, "Restarting", timeout=30)
    wait_for(
        lambda: (
            (pod := jobs.pods().get(worker)) is not None
            and pod["metadata"]["uid"] != first
            and not pod["metadata"].get("deletionTimestamp")
        ),
        30,
        message=f"{worker} created again",
    )
    kubelet.run(jobs.namespace, worker)
    jobs.wait_condition(name, "Running", timeout=30)
    kubelet.succeed(jobs.namespace, f"{name}-master-0", container="pytorch")


def _master_fails(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    _run_all(jobs, kubelet, name)
    kubelet.fail(jobs.namespace, f"{name}-master-0", 1, container="pytorch")


SCENARIOS = {
    "ddp": Scenario(
        {"Master": replica(1), "Worker": replica(2)},
        _succeed("worker-0", "worker-1", "master-0"),
        "Succeeded",
    ),
    "workers": Scenario({"Worker": replica(2)}, _succeed("worker-0", "worker-1"), "Succeeded"),
    "elastic": Scenario(
        {"Worker": replica(3)},
        _succeed("worker-1"),
        "Succeeded",
        spec={"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}},
    ),
    "exitcode": Scenario(
        {"Master": replica(1, "ExitCode"), "Worker": replica(1, "ExitCode")},
        _fail_then_succeed,
        "Succeeded",
    ),
    "never": Scenario(
        {"Master": replica(1, "Never"), "Worker": replica(1, "Never")}, _master_fails, "Failed"
    ),
}


def _outcome(jobs: Jobs, name: str) -> tuple[list[tuple[str, ...]], dict[str, Any]]:
    status = jobs.status(name)
    conditions = [
        (c["type"], c["status"], c["reason"], c["message"].replace(name, "<job>"))
        for c in status.get("conditions", [])
    ]
    return conditions, status.get("replicaStatuses", {})


def _play_all(jobs: Jobs, kubelet: FakeKubelet, prefix: str) -> dict[str, Any]:
    for scenario_name, scenario in SCENARIOS.items():
        jobs.create(f"{prefix}-{scenario_name}", scenario.specs, **(scenario.spec or {}))
    outcomes = {}
    for scenario_name, scenario in SCENARIOS.items():
        name = f"{prefix}-{scenario_name}"
        scenario.play(jobs, kubelet, name)
        jobs.wait_condition(name, scenario.ends, timeout=30)
    time.sleep(SETTLE)
    for scenario_name in SCENARIOS:
        outcomes[scenario_name] = _outcome(jobs, f"{prefix}-{scenario_name}")
    return outcomes


@pytest.fixture
def kubeflow(
    kube: Client, kubeconfig: Path, namespace: str, pytorchjob_crd_installed: None, tmp_path: Path
) -> Iterator[Kubeflow]:
    yield Kubeflow(kube, kubeconfig, namespace, tmp_path, schemes=("pytorchjob",))


def test_conditions_after_the_same_pod_outcomes_equal_kubeflows(
    kubeflow: Kubeflow, operators: Operators, pytorch: Jobs, kubelet: FakeKubelet
) -> None:
    upstream = kubeflow.start()
    try:
        theirs = _play_all(pytorch, kubelet, "kf")
    finally:
        stop(upstream)
    operators.start("--enable-scheme=pytorchjob")
    ours = _play_all(pytorch, kubelet, "tf")
    for scenario in SCENARIOS:
        (our_conditions, our_replicas), (their_conditions, their_replicas) = (
            ours[scenario],
            theirs[scenario],
        )
        # tfjob's failure message adds which pod failed and how (docs/behaviour.md).
        assert _upstream_part(our_conditions) == their_conditions, scenario
        assert _counts(our_replicas) == _counts(their_replicas), scenario
        for rtype, counts in their_replicas.items():
            # Upstream sets a type's selector only when its map iteration reaches
            # the type before the job's end; tfjob always sets it.
            if "selector" in counts:
                assert our_replicas[rtype]["selector"] == counts["selector"].replace("=kf-", "=tf-")
        assert all("selector" in counts for counts in our_replicas.values())


def _upstream_part(conditions: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The conditions with tfjob's addition to a failure message cut off."""
    return [(*c[:3], c[3].split(" <job>-", 1)[0]) if c[0] == "Failed" else c for c in conditions]


def _counts(replicas: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {
        rtype: {k: v for k, v in counts.items() if k != "selector"}
        for rtype, counts in replicas.items()
    }
