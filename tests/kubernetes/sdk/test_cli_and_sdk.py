"""A job submitted with `tfjob submit` is an ordinary TFJob to Kubeflow's SDK and to
kubectl, and a job the SDK created is shown by `tfjob get` and `tfjob wait`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

from testkit.cluster_cli import Cli, job_document
from testkit.controlplane import ControlPlane
from testkit.kubelet import FakeKubelet
from testkit.sdk_jobs import build_tfjob


def test_the_sdk_and_kubectl_see_a_submitted_job_unchanged(
    training_client: Any,
    control_plane: ControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    cli = Cli(kubeconfig, namespace, tmp_path)
    document = job_document("from-cli", 2)
    assert cli("submit", str(cli.write(document))).returncode == 0

    job = training_client.get_job("from-cli")
    worker = job.spec.tf_replica_specs["Worker"]
    assert (worker.replicas, worker.restart_policy) == (2, "Never")
    assert (
        worker.template.spec.containers[0].image
        == document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
            "image"
        ]
    )
    assert [j.metadata.name for j in training_client.list_jobs()] == ["from-cli"]

    kubectl = control_plane.assets.tool("kubectl")
    where = [f"--kubeconfig={kubeconfig}", "-n", namespace]
    shown = subprocess.run(
        [str(kubectl), *where, "get", "tfjob", "from-cli", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(shown.stdout)["spec"]["tfReplicaSpecs"] == document["spec"]["tfReplicaSpecs"]


def test_tfjob_get_and_wait_follow_a_job_the_sdk_created(
    kubeflow_sdk: ModuleType,
    training_client: Any,
    kubelet: FakeKubelet,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    cli = Cli(kubeconfig, namespace, tmp_path)
    training_client.create_job(build_tfjob(kubeflow_sdk, "from-sdk"))
    waiting = cli.start("wait", "from-sdk", "--timeout", "50s")
    pods = ("from-sdk-worker-0", "from-sdk-worker-1", "from-sdk-ps-0")
    kubelet.wait_for_pods(namespace, len(pods))
    for pod in pods:
        kubelet.run(namespace, pod)
    for pod in pods[:2]:
        kubelet.succeed(namespace, pod)
    assert waiting.wait() == 0, waiting.output()
    listed = cli("get")
    assert listed.stdout.splitlines()[1].split()[:2] == ["from-sdk", "Succeeded"]
