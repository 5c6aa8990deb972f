"""A job submitted with `tfjob submit` is an ordinary TFJob (or PyTorchJob) to
Kubeflow's SDK and to kubectl, and a job the SDK created is shown by `tfjob get` and
`tfjob wait`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

from testkit.cluster import KwokPods
from testkit.cluster_cli import Cli, job_document, pytorch_document
from testkit.controlplane import ControlPlane
from testkit.kubelet import FakeKubelet
from testkit.sdk_jobs import build_pytorchjob, build_tfjob


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
    assert listed.stdout.splitlines()[1].split()[:3] == ["from-sdk", "TFJob", "Succeeded"]


def test_the_sdk_reads_a_submitted_pytorchjob_and_tfjob_follows_one_the_sdk_created(
    kubeflow_sdk: ModuleType,
    pytorch_client: Any,
    kwok: KwokPods,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    cli = Cli(kubeconfig, namespace, tmp_path)
    document = pytorch_document("from-cli", 2)
    assert cli("submit", str(cli.write(document))).returncode == 0
    job = pytorch_client.get_job("from-cli")
    assert {t: s.replicas for t, s in job.spec.pytorch_replica_specs.items()} == {
        "Master": 1,
        "Worker": 2,
    }

    pytorch_client.create_job(build_pytorchjob(kubeflow_sdk, "from-sdk", workers=1))
    assert sorted(j.metadata.name for j in pytorch_client.list_jobs()) == ["from-cli", "from-sdk"]
    waiting = cli.start("wait", "from-sdk", "--timeout", "50s")
    kwok.wait_running(namespace, 2, labels={"training.kubeflow.org/job-name": "from-sdk"})
    kwok.end(namespace, "from-sdk-master-0", 0)
    assert waiting.wait() == 0, waiting.output()
    rows = [line.split() for line in cli("get", "pytorchjobs").stdout.splitlines()[1:]]
    assert [row[:3] for row in rows if row[0] == "from-sdk"] == [
        ["from-sdk", "PyTorchJob", "Succeeded"]
    ]
    assert cli("delete", "from-cli").stdout.strip() == 'pytorchjob.kubeflow.org "from-cli" deleted'
    assert [j.metadata.name for j in pytorch_client.list_jobs()] == ["from-sdk"]
