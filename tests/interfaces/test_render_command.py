"""`tfjob render`: the operator's pods and services for a job, without creating any."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from testkit import fast_yaml
from testkit.tfjob_cli import REPO, tfjob

DIST_MNIST = REPO / "tests/fixtures/dist-mnist.yaml"


def _render(*args: str) -> list[dict[str, object]]:
    result = tfjob("render", *args)
    assert result.returncode == 0, result.stderr
    return list(fast_yaml.load_all(result.stdout))


def test_dist_mnist_renders_six_pods_then_six_services() -> None:
    documents = _render(str(DIST_MNIST))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["Pod"] * 6 + ["Service"] * 6
    names = [d["metadata"]["name"] for d in documents[:6]]  # type: ignore[index]
    prefix = "dist-mnist-for-e2e-test"
    assert names == [f"{prefix}-ps-0", f"{prefix}-ps-1"] + [
        f"{prefix}-worker-{i}" for i in range(4)
    ]
    assert [d["metadata"]["name"] for d in documents[6:]] == names  # type: ignore[index]


def test_namespace_and_cluster_domain_reach_tf_config() -> None:
    documents = _render(
        str(DIST_MNIST), "--namespace", "team-a", "--cluster-domain", "cluster.local"
    )
    pod = documents[0]
    env = pod["spec"]["containers"][0]["env"]  # type: ignore[index]
    config = json.loads(next(e["value"] for e in env if e["name"] == "TF_CONFIG"))
    assert pod["metadata"]["namespace"] == "team-a"  # type: ignore[index]
    assert (
        config["cluster"]["ps"][1] == "dist-mnist-for-e2e-test-ps-1.team-a.svc.cluster.local:2222"
    )
    assert len(config["cluster"]["worker"]) == 4


def test_gang_scheduler_name_adds_the_groups_and_ties_the_pods_to_them() -> None:
    """Same flag as the operator: the group objects come first, pods join them."""
    documents = _render(str(DIST_MNIST), "--gang-scheduler-name", "default-scheduler")
    assert [d["kind"] for d in documents] == ["Workload", "PodGroup"] + ["Pod"] * 6 + [
        "Service"
    ] * 6
    policy = documents[1]["spec"]["schedulingPolicy"]  # type: ignore[index]
    assert policy == {"gang": {"minCount": 6}}
    for pod in documents[2:8]:
        assert pod["spec"]["schedulerName"] == "default-scheduler"  # type: ignore[index]
        assert pod["spec"]["schedulingGroup"] == {  # type: ignore[index]
            "podGroupName": "dist-mnist-for-e2e-test"
        }
    volcano = _render(str(DIST_MNIST), "--gang-scheduler-name", "volcano")
    assert volcano[0]["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert volcano[0]["spec"]["minMember"] == 6  # type: ignore[index]


TORCH_DDP = REPO / "examples/trainjob/torch-ddp.yaml"


def _objects(*args: str) -> list[dict[str, Any]]:
    """A TrainJob's rendered objects, read as nested documents."""
    return [dict(d) for d in _render(*args)]


def test_a_trainjob_renders_its_runtime_snapshot_then_its_jobset() -> None:
    """What the TrainJob controller applies for the example, from Trainer's shipped
    torch-distributed: the cluster's names and port, not the local run's."""
    snapshot, jobset = _objects(str(TORCH_DDP), "-n", "team")
    assert (snapshot["kind"], snapshot["metadata"]["name"]) == (
        "ConfigMap",
        "torch-ddp-runtime-snapshot",
    )
    assert "name: torch-distributed" in snapshot["data"]["runtime"]
    assert (jobset["kind"], jobset["metadata"]["namespace"]) == ("JobSet", "team")
    (node,) = jobset["spec"]["replicatedJobs"]
    assert (node["template"]["spec"]["parallelism"], node["template"]["spec"]["completions"]) == (
        2,
        2,
    )
    (container,) = node["template"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PET_MASTER_ADDR"] == "torch-ddp-node-0-0.torch-ddp"
    assert (env["PET_MASTER_PORT"], env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == (
        "29500",
        "2",
        "2",
    )
    assert container["command"] == ["torchrun", "../pytorch/ddp.py"]


def test_an_mpi_trainjob_renders_its_ssh_secret_and_hostfile(tmp_path: Path) -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "ds"},
        "spec": {"runtimeRef": {"name": "deepspeed-distributed"}, "trainer": {"numNodes": 3}},
    }
    path = tmp_path / "trainjob.yaml"
    path.write_text(yaml.safe_dump(trainjob))
    kinds = [(d["kind"], d["metadata"]["name"]) for d in _objects(str(path))]
    assert kinds == [
        ("ConfigMap", "ds-runtime-snapshot"),
        ("Secret", "ds-mpi-ssh-auth"),
        ("ConfigMap", "ds-mpi-hostfile"),
        ("JobSet", "ds"),
    ]
    hostfile = _objects(str(path))[2]["data"]["hostfile"]
    # Every node pod's name and the launcher's (runLauncherAsNode), one slot each.
    assert sorted(hostfile.splitlines()) == [
        "ds-launcher-0-0.ds slots=1", "ds-node-0-0.ds slots=1", "ds-node-0-1.ds slots=1"
    ]  # fmt: skip


def test_a_trainjob_without_its_runtime_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "trainjob.yaml"
    path.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
        "spec: {runtimeRef: {name: no-such-runtime}}\n"
    )
    result = tfjob("render", str(path))
    assert result.returncode == 2
    assert '"no-such-runtime" not found' in result.stderr
