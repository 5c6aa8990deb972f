"""`tfjob render`: the operator's pods and services for a job, without creating any."""

from __future__ import annotations

import json

import yaml

from testkit.tfjob_cli import REPO, tfjob

DIST_MNIST = REPO / "tests/fixtures/dist-mnist.yaml"


def _render(*args: str) -> list[dict[str, object]]:
    result = tfjob("render", *args)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


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
