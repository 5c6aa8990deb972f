"""The cluster commands take Kubeflow Trainer's TrainJob as they take the v1 kinds: a
TrainJob file is submitted, listed beside a TFJob of the same name (refused until the
kind is named), waited for, its trainer's pods logged, and deleted.

End to end, everything is real: the API server with tfjob's CRDs, JobSet's controller
manager (testkit/trainjob_fixtures.py, shared with tests/kubernetes/trainjob), a
`tfjob operator` reconciling TrainJobs (no Trainer controller runs), the Job
controller making the JobSet's pods and kwok running them, serving their logs and
ending them as a runtime patch asks (testkit/trainjobs.py `ending`). The first tests
read the same things from the in-memory API (testkit/fake_api.py) and check files
without a cluster.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from testkit.cluster import Cluster, Nodes
from testkit.cluster_cli import Cli, job_document
from testkit.controlplane import ControlPlane
from testkit.fake_api import FakeApi
from testkit.helpers import tfjob, wait_for
from testkit.operators import Operators, RunningOperator
from testkit.trainjob_fixtures import jobset, trainer_api
from testkit.trainjobs import TrainJobs, ending, trainjob
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.interfaces.cli import cli as tfjob_cli
from tfjob.interfaces.cluster_client.jobs_api import AmbiguousJob, JobsApi, NoJobApi
from tfjob.interfaces.cluster_client.kinds import TRAINJOB
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, TRAINJOBS, jobs_of

__all__ = ["jobset", "trainer_api"]  # shared fixtures (testkit/trainjob_fixtures.py)

NS = "team"
TORCH = "torch-distributed"
HEADER = ["NAME", "KIND", "STATE", "READY", "SUCCEEDED", "FAILED", "RESTARTS", "AGE"]


def _rows(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split()[: len(HEADER)] == HEADER
    return [row.split() for row in rows]


def _pod(name: str, jobset_name: str, completion: str, created: str) -> dict[str, Any]:
    """A pod of a JobSet's `node` Job, labelled as JobSet and the Job controller do."""
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": jobset_name,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": completion,
            },
        },
        "status": {"phase": "Running"},
    }


# -- without a cluster ------------------------------------------------------------------


async def test_a_trainjob_is_found_beside_the_v1_kinds_with_its_jobsets_pods() -> None:
    api = FakeApi(namespaces=[NS])
    jobs = JobsApi(api.client(), NS)  # type: ignore[arg-type]
    made = await jobs.create(trainjob("train", TORCH, num_nodes=2))
    await jobs.create(tfjob("train", None))
    with pytest.raises(AmbiguousJob, match="say which, as tfjob/train or trainjob/train"):
        await jobs.find("train")
    found = await jobs.find("train", TRAINJOB)
    assert (found["kind"], found["metadata"]["uid"]) == ("TrainJob", made["metadata"]["uid"])
    listed = [(j["metadata"]["name"], j["kind"]) for j in await jobs.list_jobs()]
    assert listed == [("train", "TFJob"), ("train", "TrainJob")]

    born = found["metadata"]["creationTimestamp"]
    client = api.client()
    for pod in (
        _pod("train-node-0-0-a", "train", "0", born),
        _pod("train-node-0-1-b", "train", "1", born),
        _pod("other-node-0-0-c", "other", "0", born),
    ):
        await client.create(PODS, NS, pod)
    pods = await jobs.pods(TRAINJOB, "train")
    assert [p["metadata"]["name"] for p in pods] == ["train-node-0-0-a", "train-node-0-1-b"]
    assert all(TRAINJOB.owns(p, found) for p in pods)
    assert [TRAINJOB.replica(p["metadata"]) for p in pods] == ["node-0", "node-1"]
    assert TRAINJOB.replica(pods[0]["metadata"], "sidecar") == "node-0/sidecar"
    earlier = _pod("train-node-0-0-z", "train", "0", "2000-01-01T00:00:00Z")
    assert not TRAINJOB.owns(earlier, found)  # an earlier "train"'s, still going away
    every = {p["metadata"]["name"] for p in await jobs.pods()}
    assert "other-node-0-0-c" in every  # a listing reads every kind's pods


async def test_without_the_trainjob_crd_trainjobs_are_left_out_and_named_when_asked() -> None:
    api = FakeApi(namespaces=[NS], served=[PODS, EVENTS, jobs_of(TENSORFLOW)])
    jobs = JobsApi(api.client(), NS)  # type: ignore[arg-type]
    await jobs.create(tfjob("j", None))
    assert [j["kind"] for j in await jobs.list_jobs()] == ["TFJob"]
    with pytest.raises(NoJobApi) as error:
        await jobs.list_jobs(TRAINJOB)
    assert str(error.value) == (
        "the cluster has no trainjobs.trainer.kubeflow.org resource (the TrainJob CRD is "
        "not installed): kubectl apply --server-side -k manifests/base, or install "
        "Kubeflow Trainer"
    )
    served = FakeApi(namespaces=[NS], served=[PODS, EVENTS, TRAINJOBS])
    assert [k.kind for k in await JobsApi(served.client(), NS).served()] == ["TrainJob"]  # type: ignore[arg-type]


def test_a_trainjobs_state_is_its_latest_condition_that_holds() -> None:
    resumed = {"type": "Suspended", "status": "False", "reason": "Resumed"}
    running = {"status": {"conditions": [resumed], "jobsStatus": [{"name": "node", "active": 2}]}}
    assert TRAINJOB.state(running) == "Running"
    assert not TRAINJOB.finished(running)
    complete = {"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}
    done = {"status": {"conditions": [complete, resumed]}}
    assert (TRAINJOB.state(done), TRAINJOB.finished(done)) == ("Complete", True)
    assert TRAINJOB.state({"status": {}}) == ""  # shown as Created


def test_submit_checks_a_trainjob_by_its_crds_rules_before_sending_it(tmp_path: Path) -> None:
    bad = trainjob("bad", TORCH, num_nodes=0)
    path = tmp_path / "bad.yaml"
    path.write_text(f"{_yaml(tfjob('fine', None))}---\n{_yaml(bad)}")
    result = CliRunner().invoke(
        tfjob_cli, ["submit", str(path), "--kubeconfig", str(tmp_path / "none")]
    )
    assert result.exit_code == 2, result.output
    assert "invalid TFJob or TrainJob (1 error)" in result.output
    assert "document 2: spec.trainer.numNodes" in result.output


def _yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


# -- end to end: tfjob's operator, JobSet's controller, kwok ---------------------------


@pytest.fixture
def trainjob_operator(
    trainer_api: list[dict[str, Any]], cli: Cli, operators: Operators
) -> RunningOperator:
    """tfjob's operator for TrainJobs only, started once every CRD is installed."""
    return operators.start("--enable-scheme=trainjob")


def test_a_trainjob_is_submitted_listed_waited_for_logged_and_deleted(
    trainjob_operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli
) -> None:
    nodes.add(1)
    cluster.write_container_log(["epoch 1 loss 0.7", "epoch 2 loss 0.3"])
    document = trainjob("mnist", TORCH, num_nodes=2, patches=[ending(0, "6s")])
    submitted = cli("submit", str(cli.write(document)))
    assert submitted.stdout.strip() == "trainjob.trainer.kubeflow.org/mnist created", (
        submitted.stderr
    )
    assert cli("submit", str(cli.write(job_document("mnist")))).returncode == 0  # a TFJob

    ambiguous = cli("wait", "mnist")
    assert ambiguous.returncode == 2
    assert ambiguous.stderr.strip() == (
        f'tfjob: "mnist" is a TFJob and a TrainJob in namespace {cli.namespace}: say which, '
        "as tfjob/mnist or trainjob/mnist"
    )
    running = cli("wait", "trainjob/mnist", "--for", "Running", "--timeout", "40s")
    assert running.returncode == 0, running.stderr
    listing = wait_for(
        lambda: (rows := _rows(cli("get"))) and rows[1][3] == "2/2" and rows,
        20,
        interval=0.5,
        message="both nodes' pods ready",
    )
    assert [row[:2] for row in listing] == [["mnist", "TFJob"], ["mnist", "TrainJob"]]
    assert listing[1][2] == "Running", listing

    logs = cli("logs", "trainjob/mnist")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        f"[{node}] {line}"
        for node in ("node-0", "node-1")
        for line in ("epoch 1 loss 0.7", "epoch 2 loss 0.3")
    ]

    done = cli("wait", "trainjob", "mnist", "--timeout", "40s")
    assert (done.returncode, done.stderr) == (0, "")
    (row,) = _rows(cli("get", "trainjobs"))
    assert row[:6] == ["mnist", "TrainJob", "Complete", "0/2", "2", "0"], row
    shown = cli("get", "trainjob/mnist")
    assert "State:      Complete (AllJobsCompleted" in shown.stdout, shown.stdout
    assert "node-1" in shown.stdout  # the replica table lists the JobSet's pods

    deleted = cli("delete", "trainjob/mnist", "--wait", "--timeout", "30s")
    assert deleted.stdout.strip() == 'trainjob.trainer.kubeflow.org "mnist" deleted', deleted.stderr
    assert [row[:2] for row in _rows(cli("get"))] == [["mnist", "TFJob"]]
    gone = cli("get", "trainjobs")
    assert gone.stderr.strip() == f"No TrainJobs in namespace {cli.namespace}."


def test_waiting_for_a_failing_trainjob_exits_1_with_its_reason(
    trainer_api: list[dict[str, Any]],
    trainjob_operator: RunningOperator,
    control_plane: ControlPlane,
    nodes: Nodes,
    cli: Cli,
) -> None:
    """A pod that exits 1 fails its Job (no retries in this copy of the torch
    runtime), the JobSet and the TrainJob; `wait` says so, with the reason."""
    (shipped,) = [r for r in trainer_api if r["metadata"]["name"] == TORCH]
    runtime = copy.deepcopy(shipped)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": "fail-fast", "namespace": cli.namespace}
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    TrainJobs(control_plane, cli.namespace).create_runtime(runtime)
    nodes.add(1)
    document = trainjob("broken", "fail-fast", kind="TrainingRuntime", patches=[ending(1)])
    assert cli("submit", str(cli.write(document))).returncode == 0

    waited = cli("wait", "broken", "--timeout", "50s")
    assert waited.returncode == 1, waited.stderr
    (line,) = waited.stderr.strip().splitlines()
    assert line.startswith("tfjob: broken failed: ") and line.endswith("; reason FailedJobs"), line
    (row,) = _rows(cli("get", "trainjobs", "-o", "wide"))
    assert (row[2], row[5], row[-1]) == ("Failed", "1", "FailedJobs"), row
    assert row[3] == "0/?"  # no numNodes: the runtime's decides
    for_running = cli("wait", "trainjob/broken", "--for", "Running")
    assert for_running.returncode == 1
    assert for_running.stderr.strip() == "tfjob: broken finished (Failed) without being Running"
