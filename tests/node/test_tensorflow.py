"""The TensorFlow examples made for clusters (examples/tensorflow/cluster/) train for
real across pods on the node: an image holding tensorflow-cpu and the code, TF_CONFIG
naming the replicas' headless Services, resolved by CoreDNS, the operator from its
image deciding the outcome. Followed live with `tfjob submit --follow` on a terminal,
read back with `tfjob logs`; the parameter-server job twice under one name, each run
with its own checkpoints and results."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from testkit import fast_yaml
from testkit.cluster_cli import Cli
from testkit.node import Node
from testkit.terminal import run_on_terminal
from tests.node.conftest import EXAMPLES
from tests.node.jobs import get_job, pods_of
from tests.node.tf_results import (
    check_multi_worker,
    check_parameter_server,
    model_volume,
    reports,
)

CLUSTER = EXAMPLES / "cluster"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FOLLOW_LIMIT = 600.0


@pytest.fixture
def cli(node: Node, namespace: str, tmp_path: Path) -> Cli:
    return Cli(node.kubeconfig_path, namespace, tmp_path)


def replicas_of(path: Path) -> list[str]:
    spec = fast_yaml.load(path.read_text())["spec"]["tfReplicaSpecs"]
    return [f"{kind.lower()}-{i}" for kind, r in spec.items() for i in range(r["replicas"])]


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("example", ["multi_worker.yaml", "multi_worker_chief.yaml"])
def test_multi_worker_trains_across_pods_followed_live_and_logs_read_after(
    node: Node,
    kube: Client,
    installed_operator: dict[str, Any],
    examples_image: str,
    cli: Cli,
    example: str,
) -> None:
    path = CLUSTER / example
    name = fast_yaml.load(path.read_text())["metadata"]["name"]
    replicas = replicas_of(path)

    status, screen = run_on_terminal(cli.args("submit", str(path), "--follow"), FOLLOW_LIMIT)
    text = ANSI.sub("", screen)
    assert status == 0, text[-6000:]
    # The live table, then every replica's own output as it trained.
    assert f"TFJob {name}" in text and "REPLICA" in text and "RESTARTS" in text, text[-3000:]
    for replica in replicas:
        task, index = replica.split("-")
        assert re.search(
            rf"\[{replica}\].*{task}:{index} is_chief=\w+ loss [\d.]+ -> [\d.]+", text
        ), (
            replica,
            text[-6000:],
        )
    assert "Succeeded" in text
    assert get_job(kube, cli.namespace, name)["status"]["conditions"][-1]["type"] == "Succeeded"

    # After the end, every replica's log is still there to read.
    logs = cli("logs", name)
    assert logs.returncode == 0, logs.stderr
    found = reports(logs.stdout)
    assert sorted(found) == sorted(replicas), logs.stdout[-3000:]
    # TF_CONFIG names the Services, which the cluster's DNS resolves; the all-reduce
    # crossed pods (tf_results.py: the same checks as for the converted TrainJob).
    check_multi_worker(found, f".{cli.namespace}.svc:2222")
    for replica, report in found.items():
        assert report["pod_name"] == f"{name}-{replica}"
    # Every replica ran in a pod of its own.
    pods = pods_of(kube, cli.namespace, name)
    assert [p.metadata.name for p in pods] == sorted(f"{name}-{r}" for r in replicas)
    assert len({p.status.podIP for p in pods}) == len(replicas)
    # The finished pods are kept (their logs with them) although cleanPodPolicy is
    # Running. The chief's (else worker 0's) success ends the job, so another pod may
    # still be finishing then: it ends Succeeded, or the policy removes it; none is
    # left running.
    phases = _settled_phases(kube, cli.namespace, name)
    assert f"{name}-{replicas[0]}" in phases, phases
    assert set(phases.values()) == {"Succeeded"}, phases


def _settled_phases(kube: Client, namespace: str, job: str, limit: float = 60.0) -> dict[str, str]:
    """The phase of each of the job's pods once none is Pending or Running (the kubelet
    reports a container's exit a moment after it happens), or at `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        phases = {
            p.metadata.name: p.status.phase  # type: ignore[union-attr]
            for p in pods_of(kube, namespace, job)
        }
        if not {"Pending", "Running"} & set(phases.values()) or time.monotonic() > deadline:
            return phases  # type: ignore[return-value]
        time.sleep(0.5)


def _ps_run(cli: Cli, kube: Client, name: str) -> dict[str, dict[str, Any]]:
    """Submit the PS example, follow it (plain lines) to the end, read its reports."""
    status, screen = run_on_terminal(
        [*cli.args("submit", str(CLUSTER / "parameter_server.yaml"), "--follow")], FOLLOW_LIMIT
    )
    text = ANSI.sub("", screen)
    assert status == 0, text[-6000:]
    logs = cli("logs", name)
    assert logs.returncode == 0, logs.stderr
    chief = kube.get(Pod, f"{name}-chief-0", namespace=cli.namespace)
    restarts = sum(s.restartCount for s in (chief.status.containerStatuses or []))  # type: ignore[union-attr]
    if restarts:
        previous = subprocess.run(
            [*cli.args("logs", name, "--replica", "chief-0")], capture_output=True, text=True
        )
        print(f"the chief restarted {restarts} time(s):\n{previous.stdout[-3000:]}")
    return reports(logs.stdout)


@pytest.mark.timeout(2400)
def test_parameter_server_twice_under_one_name_keeps_each_run_to_itself(
    node: Node,
    kube: Client,
    installed_operator: dict[str, Any],
    examples_image: str,
    cli: Cli,
) -> None:
    name = "tf-parameter-server"
    model_volume(node, kube, cli.namespace)

    first = _ps_run(cli, kube, name)
    assert cli("delete", name, "--wait").returncode == 0
    deadline = time.monotonic() + 120
    while pods_of(kube, cli.namespace, name):
        assert time.monotonic() < deadline, "the first run's pods are not gone"
        time.sleep(0.5)
    second = _ps_run(cli, kube, name)

    for run in (first, second):
        # Across pods, the evaluator scoring this run's final checkpoint (tf_results.py).
        check_parameter_server(run)
    # Two runs, two folders, two results: nothing of the first read by the second.
    assert first["chief-0"]["model_dir"] != second["chief-0"]["model_dir"]
    assert first["chief-0"]["losses"] != second["chief-0"]["losses"]
    assert first["evaluator-0"]["evaluations"] != second["evaluator-0"]["evaluations"]
    # Every checkpoint the second evaluator scored is the second chief's (a chief
    # restarted in place starts training over, in the same run's folder).
    steps = [e["step"] for e in second["evaluator-0"]["evaluations"]]
    assert all(step <= second["chief-0"]["global_step"] for step in steps)
    assert steps[-1] == second["chief-0"]["global_step"]
