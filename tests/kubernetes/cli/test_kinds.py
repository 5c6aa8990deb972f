"""Every cluster command takes every kind: a PyTorchJob is submitted, listed, shown,
followed, waited for and deleted as a TFJob is, and a name two kinds share is refused
until the user says which (`pytorchjob/NAME`, as kubectl takes it).

The API server and its CRDs (TFJob, PyTorchJob) are real; the tests that run a job to
its end also run `tfjob operator` and kwok (testkit/cluster.py), which runs the pods,
serves their logs and ends them with the exit code the template's annotation asks for.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource

from testkit import fast_yaml
from testkit.cluster import Cluster, Nodes
from testkit.cluster_cli import Cli, any_kind_document, ending, job_document, pytorch_document
from testkit.controlplane import (
    MANIFESTS_BASE,
    ControlPlane,
    apply_documents,
    kustomization_files,
    load_manifest,
)
from testkit.helpers import wait_for
from testkit.operators import Jobs, RunningOperator
from tfjob.frameworks.registry import FRAMEWORKS

PYTORCHJOB = create_namespaced_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
HEADER = ["NAME", "KIND", "STATE", "READY", "SUCCEEDED", "FAILED", "RESTARTS", "AGE"]


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _pytorchjob(kube: Client, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        stored: dict[str, Any] = kube.get(PYTORCHJOB, name, namespace=namespace).to_dict()
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise
    return stored


def _submit(cli: Cli, *documents: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    result = cli("submit", str(cli.write(*documents)))
    assert result.returncode == 0, result.stderr
    return result


def _rows(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == HEADER
    return [row.split() for row in rows]


# -- without an operator: what is stored ------------------------------------------------


def test_submit_creates_jobs_of_every_kind_as_written(cli: Cli, jobs: Jobs, kube: Client) -> None:
    torch = pytorch_document("torch", 2)
    result = _submit(cli, job_document("tf"), torch)
    assert result.stdout.splitlines() == [
        "tfjob.kubeflow.org/tf created",
        "pytorchjob.kubeflow.org/torch created",
    ]
    assert jobs.get("tf") is not None
    stored = _pytorchjob(kube, cli.namespace, "torch")
    assert stored is not None
    assert stored["spec"]["pytorchReplicaSpecs"] == torch["spec"]["pytorchReplicaSpecs"]


def test_submit_refuses_a_bad_pytorchjob_before_sending_anything(
    cli: Cli, jobs: Jobs, kube: Client
) -> None:
    document = pytorch_document("two-masters")
    document["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    result = cli("submit", str(cli.write(document)))
    assert result.returncode == 2
    assert "spec.pytorchReplicaSpecs[Master].replicas" in result.stderr
    assert "Traceback" not in result.stderr
    assert _pytorchjob(kube, cli.namespace, "two-masters") is None


def test_get_lists_every_kind_with_its_kind_and_one_kind_as_kubectl_names_it(
    cli: Cli, jobs: Jobs
) -> None:
    _submit(cli, job_document("tf-only"), pytorch_document("torch-only", 2))
    assert [row[:4] for row in _rows(cli("get"))] == [
        ["tf-only", "TFJob", "Created", "0/1"],
        ["torch-only", "PyTorchJob", "Created", "0/3"],
    ]
    for kind in ("pytorchjobs", "pytorchjob", "PyTorchJob", "pytorchjobs.kubeflow.org"):
        assert [row[:2] for row in _rows(cli("get", kind))] == [["torch-only", "PyTorchJob"]]
    assert [row[:2] for row in _rows(cli("get", "tfjobs"))] == [["tf-only", "TFJob"]]
    wide = cli("get", "-o", "wide")
    assert "Master:1,Worker:2" in wide.stdout and "Worker:1" in wide.stdout

    one = cli("get", "torch-only")
    assert one.returncode == 0, one.stderr
    assert "Kind:       PyTorchJob" in one.stdout
    assert "PyTorchJob torch-only" in one.stdout  # the replica table's title
    listed = json.loads(cli("get", "-o", "json").stdout)
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("TFJob", "tf-only"),
        ("PyTorchJob", "torch-only"),
    ]


def test_a_name_two_kinds_share_is_refused_until_the_kind_is_named(
    cli: Cli, jobs: Jobs, kube: Client
) -> None:
    _submit(cli, job_document("twin"), pytorch_document("twin"))
    ambiguous = (
        f'tfjob: "twin" is a TFJob and a PyTorchJob in namespace {cli.namespace}: '
        "say which, as tfjob/twin or pytorchjob/twin"
    )
    for args in (["get", "twin"], ["logs", "twin"], ["wait", "twin"], ["delete", "twin"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert _one_line(result) == ambiguous
    assert [row[:2] for row in _rows(cli("get"))] == [["twin", "TFJob"], ["twin", "PyTorchJob"]]

    for args in (["pytorchjob/twin"], ["pytorchjob", "twin"], ["pytorchjobs.kubeflow.org/twin"]):
        shown = cli("get", *args, "-o", "yaml")
        assert shown.returncode == 0, shown.stderr
        assert fast_yaml.load(shown.stdout)["kind"] == "PyTorchJob"
    assert json.loads(cli("get", "tfjob/twin", "-o", "json").stdout)["kind"] == "TFJob"

    deleted = cli("delete", "pytorchjob/twin", "--wait", "--timeout", "30s")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == 'pytorchjob.kubeflow.org "twin" deleted'
    assert _pytorchjob(kube, cli.namespace, "twin") is None
    assert jobs.get("twin") is not None  # the TFJob of that name stays
    gone = cli("delete", "pytorchjob", "twin")
    assert gone.returncode == 2
    assert _one_line(gone) == f'tfjob: no PyTorchJob "twin" in namespace {cli.namespace}'
    only = cli("delete", "twin")  # one kind holds it now: no need to say which
    assert only.stdout.strip() == 'tfjob.kubeflow.org "twin" deleted'


def test_an_unknown_kind_or_a_malformed_name_is_bad_input(cli: Cli, jobs: Jobs) -> None:
    for args in (["get", "mxjobs/x"], ["wait", "mxjob", "x"], ["delete", "x", "y", "z"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        line = _one_line(result)
        assert line.startswith("tfjob: "), line
    assert _one_line(cli("get", "mxjobs/x")).startswith(
        "tfjob: 'mxjobs' is not a kind of job: write one of tfjob, pytorchjob"
    )
    assert _one_line(cli("delete", "x", "y", "z")) == (
        "tfjob: x y z: name one job, as NAME, KIND NAME or KIND/NAME"
    )


# -- which kinds a cluster serves ------------------------------------------------------

_FIX = "kubectl apply -k manifests/base, or install Kubeflow's training operator"


def _missing(resource: str, kind: str) -> str:
    return (
        f"tfjob: the cluster has no {resource} resource (the {kind} CRD is not installed): {_FIX}"
    )


def _crds() -> list[dict[str, Any]]:
    """Every CRD manifests/base installs: one per kind tfjob serves."""
    documents = [doc for path in kustomization_files() for doc in load_manifest(path)]
    return [doc for doc in documents if doc["kind"] == "CustomResourceDefinition"]


def test_the_kinds_served_follow_the_crds_installed(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A second, fresh API server (the session's keeps its CRDs): no CRD at first,
    then TFJob's only, then every kind's. Nothing in the commands names a kind: each
    one in the registry (TFJob, PyTorchJob, JAXJob, ...) is served from its
    declaration once its CRD is installed."""
    with (
        ControlPlane(control_plane.assets) as bare,
        Client(KubeConfig.from_file(bare.kubeconfig_path)) as admin,
    ):
        plain = Cli(bare.kubeconfig_path, "default", tmp_path)
        tf_file = str(plain.write(job_document("x")))
        torch_file = str(plain.write(pytorch_document("t")))
        for args in (["get"], ["get", "x"], ["wait", "x"]):
            result = plain(*args)
            assert result.returncode == 3, result.stderr
            line = _one_line(result)
            assert line.startswith(
                "tfjob: the cluster has none of the resources tfjobs.kubeflow.org, "
                "pytorchjobs.kubeflow.org"
            ), line
            assert line.endswith(f"(no CRD of a job kind is installed): {_FIX}"), line
        submitted = plain("submit", tf_file)
        assert submitted.returncode == 3
        assert _one_line(submitted) == _missing("tfjobs.kubeflow.org", "TFJob")

        # TFJob's CRD only: the others are left out, and named when asked for.
        apply_documents(admin, load_manifest(MANIFESTS_BASE / "crd.yaml"))
        listed = wait_for(lambda: (r := plain("get")).returncode == 0 and r, 30.0)
        assert listed.stdout == "" and listed.stderr.strip() == "No jobs in namespace default."
        missing_torch = _missing("pytorchjobs.kubeflow.org", "PyTorchJob")
        for args in (["get", "pytorchjobs"], ["logs", "pytorchjob/t"], ["submit", torch_file]):
            result = plain(*args)
            assert result.returncode == 3, (args, result.stderr)
            assert _one_line(result) == missing_torch
        unknown = plain("get", "t")  # looked for among the kinds installed: TFJob
        assert unknown.returncode == 2
        assert _one_line(unknown) == 'tfjob: no TFJob "t" in namespace default'
        assert plain("submit", tf_file).returncode == 0
        assert [row[:2] for row in _rows(plain("get"))] == [["x", "TFJob"]]
        assert plain("delete", "x").stdout.strip() == 'tfjob.kubeflow.org "x" deleted'

        # Every kind's CRD: every kind in the registry is submitted, listed, shown and
        # deleted by name.
        for crd in _crds():
            apply_documents(admin, [crd])
        kinds = list(FRAMEWORKS.values())
        wait_for(lambda: all(plain("get", k.plural).returncode == 0 for k in kinds), 30.0)
        named = {f"{k.kind.lower()}-job": k for k in kinds}
        created = _submit(plain, *(any_kind_document(k, name) for name, k in named.items()))
        assert created.stdout.splitlines() == [
            f"{k.kind.lower()}.{k.group}/{name} created" for name, k in named.items()
        ]
        listing = _rows(plain("get"))
        assert [row[:2] for row in listing] == [[n, named[n].kind] for n in sorted(named)]
        for name, kind in named.items():
            assert [row[:4] for row in _rows(plain("get", kind.plural))] == [
                [name, kind.kind, "Created", f"0/{len(kind.master_types[:1]) + 1}"]
            ]
            shown = plain("get", name)
            assert f"Kind:       {kind.kind}" in shown.stdout, shown.stderr
            deleted = plain("delete", name)
            assert deleted.stdout.strip() == f'{kind.kind.lower()}.{kind.group} "{name}" deleted'
        empty = plain("get")
        assert (empty.returncode, empty.stdout) == (0, "")
        assert empty.stderr.strip() == "No jobs in namespace default."


# -- with tfjob's operator: a PyTorchJob run to its end --------------------------------


@pytest.fixture
def torch_operator(cli: Cli, operator: RunningOperator) -> RunningOperator:
    """The operator, started once both CRDs are installed (`cli` installs them)."""
    return operator


def test_a_pytorchjob_is_followed_logged_waited_for_and_deleted(
    torch_operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, kube: Client
) -> None:
    nodes.add(1)
    cluster.write_container_log(["training"])
    document = ending(pytorch_document("ddp", 2), exit_code=0, run_for="10s")
    following = cli.start("submit", "--follow", str(cli.write(document)))
    following.wait_output(lambda text: "created PyTorchJob ddp" in text)
    waiting = cli.start("wait", "ddp", "--timeout", "55s")
    running = cli("wait", "ddp", "--for", "Running", "--timeout", "40s")
    assert running.returncode == 0, running.stderr + following.output()

    logs = cli("logs", "ddp")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        "[master-0] training",
        "[worker-0] training",
        "[worker-1] training",
    ]
    listing = _rows(cli("get", "pytorchjobs"))
    assert [row[:4] for row in listing] == [["ddp", "PyTorchJob", "Running", "3/3"]]

    assert following.wait() == 0, following.output()
    assert waiting.wait() == 0, waiting.output()
    output = following.output()
    assert f"[tfjob] created PyTorchJob ddp in namespace {cli.namespace}" in output
    assert "[tfjob] Created pod: ddp-master-0" in output
    lines = output.splitlines()
    for replica in ("master-0", "worker-0", "worker-1"):
        assert lines.count(f"[{replica}] training") == 1, output

    shown = cli("get", "ddp")
    assert "State:      Succeeded" in shown.stdout, shown.stdout
    assert "SuccessfulCreatePod" in shown.stdout  # the PyTorchJob's own events
    deleted = cli("delete", "ddp", "--wait", "--timeout", "30s")
    assert deleted.stdout.strip() == 'pytorchjob.kubeflow.org "ddp" deleted', deleted.stderr
    assert _pytorchjob(kube, cli.namespace, "ddp") is None


def test_a_failed_pytorchjob_ends_follow_and_wait_with_1_and_the_reason(
    torch_operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli
) -> None:
    nodes.add(1)
    cluster.write_container_log(["oops"])
    document = ending(pytorch_document("broken", 1, master=False), exit_code=3, run_for="2s")
    following = cli.start("submit", "--follow", str(cli.write(document)))
    assert following.wait() == 1, following.output()
    assert "[worker-0] oops" in following.output().splitlines()
    assert "tfjob: broken failed:" in following.output()
    waited = cli("wait", "pytorchjob/broken")
    assert waited.returncode == 1
    assert _one_line(waited).startswith("tfjob: broken failed:")
