"""PyTorchJobs under `tfjob operator`: the same operator process that serves TFJobs
creates a PyTorchJob's pods and services, names the kind in its Events and metrics as
upstream does, and runs it to its end by PyTorchJob's rules (test_status_parity.py
compares its statuses with Kubeflow's)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from testkit.controlplane import ControlPlane
from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators
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


def test_a_suspended_pytorchjob_loses_its_pods_and_resumes(
    operators: Operators, pytorch: Jobs, kubelet: FakeKubelet
) -> None:
    operators.start()
    ns = pytorch.namespace
    names = {"sus-master-0", "sus-worker-0"}
    pytorch.create("sus", {"Master": replica(1), "Worker": replica(1)})
    pytorch.wait_pods(names)
    for name in sorted(names):
        kubelet.run(ns, name)
    pytorch.wait_condition("sus", "Running")

    pytorch.patch_spec("sus", {"runPolicy": {"suspend": True}})
    pytorch.wait_condition("sus", "Suspended")
    pytorch.wait_pods(set())
    pytorch.wait_services(set())
    assert pytorch.conditions("sus")[-1] == ("Suspended", "True", "PyTorchJobSuspended")

    pytorch.patch_spec("sus", {"runPolicy": {"suspend": False}})
    pytorch.wait_pods(names)
    assert set(pytorch.wait_services(names)) == names
    resumed = pytorch.conditions("sus")
    assert ("Suspended", "False", "PyTorchJobResumed") in resumed


def test_a_pytorchjob_managed_by_multikueue_is_left_alone(
    operators: Operators, pytorch: Jobs
) -> None:
    operators.start()
    pytorch.create(
        "theirs", {"Worker": replica(1)}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}
    )
    pytorch.create("ours", {"Worker": replica(1)})
    pytorch.wait_condition("ours", "Created")
    pytorch.wait_pods({"ours-worker-0"})
    time.sleep(0.5)
    assert pytorch.status("theirs") == {}
    assert set(pytorch.pods()) == {"ours-worker-0"}
    assert pytorch.events("theirs") == []


def test_kubectl_scale_adds_workers_through_the_scale_subresource(
    operators: Operators, pytorch: Jobs, kubelet: FakeKubelet, control_plane: ControlPlane
) -> None:
    """`kubectl scale pytorchjob/NAME --replicas=3` sets the Workers' count; the scale
    subresource reads the Workers' selector from the status tfjob writes."""
    operators.start()
    ns = pytorch.namespace
    pytorch.create("grow", {"Master": replica(1), "Worker": replica(1)})
    pytorch.wait_pods({"grow-master-0", "grow-worker-0"})
    kubectl = control_plane.assets.tool("kubectl")
    scale = [str(kubectl), f"--kubeconfig={control_plane.kubeconfig_path}", "-n", ns]
    wait_for(
        lambda: pytorch.status("grow").get("replicaStatuses", {}).get("Worker", {}).get("selector"),
        message="the Workers' selector in status",
    )
    subprocess.run([*scale, "scale", "pytorchjob/grow", "--replicas=3"], check=True)
    pytorch.wait_pods({"grow-master-0", "grow-worker-0", "grow-worker-1", "grow-worker-2"})
    status, body = control_plane.request(
        "GET", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/grow/scale"
    )
    assert status == 200, body
    assert body["spec"]["replicas"] == 3
    assert body["status"]["selector"] == (
        "training.kubeflow.org/job-name=grow,"
        "training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
    env = {
        e["name"]: e.get("value")
        for e in pytorch.pods()["grow-worker-2"]["spec"]["containers"][0]["env"]
    }
    assert (env["RANK"], env["WORLD_SIZE"]) == ("3", "4")
