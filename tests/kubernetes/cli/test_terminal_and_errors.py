"""What the cluster commands show on a terminal, and how they fail on bad input: one
line on stderr, no traceback, an exit status that says which kind of problem."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

from testkit.cluster import Cluster, Nodes
from testkit.cluster_cli import (
    LIMIT,
    Cli,
    ending_job,
    is_no_job,
    job_document,
    pytorch_document,
)
from testkit.controlplane import MANIFESTS_BASE, ControlPlane, apply_documents, load_manifest
from testkit.helpers import wait_for
from testkit.operators import Jobs, RunningOperator
from testkit.terminal import run_on_terminal


def test_submit_follow_on_a_terminal_shows_the_live_table_and_coloured_output(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    nodes.add(1)
    cluster.write_container_log(["hello from the cluster"])
    path = cli.write(ending_job("live", 2, exit_code=0, run_for="3s"))
    status, output = run_on_terminal(cli.args("submit", str(path), "--follow"), LIMIT)
    assert status == 0, output
    assert "\x1b[" in output  # colour
    assert "TFJob live" in output  # the table's title
    assert "REPLICA" in output and "RESTARTS" in output and "ELAPSED" in output
    assert "live-worker-1" in output
    assert "hello from the cluster" in output
    assert "Succeeded" in output


# -- bad input -------------------------------------------------------------------------


def _single_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_no_cluster_reachable_is_one_line_and_exit_3(
    kubeconfig: Path, tmp_path: Path, cli: Cli
) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # discard: nobody
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(yaml.safe_dump(config))
    away = Cli(unreachable, "default", tmp_path)
    for args in (["get"], ["wait", "x"], ["submit", str(cli.write(job_document("x")))]):
        result = away(*args)
        assert result.returncode == 3, result.stderr
        assert _single_line(result).startswith(
            "tfjob: cannot reach the cluster at https://127.0.0.1:9:"
        )


def test_a_missing_kubeconfig_or_context_is_one_line_and_exit_3(
    tmp_path: Path, cli: Cli, namespace: str
) -> None:
    missing = Cli(tmp_path / "nowhere", "default", tmp_path)("get")
    assert missing.returncode == 3
    assert _single_line(missing).startswith("tfjob: cannot use the kubeconfig:")
    no_context = cli("get", "--context", "elsewhere")
    assert no_context.returncode == 3
    assert "elsewhere" in _single_line(no_context)


def _missing(resource: str, kind: str) -> str:
    return (
        f"tfjob: the cluster has no {resource} resource (the {kind} CRD is not installed): {_FIX}"
    )


_FIX = "kubectl apply -k manifests/base, or install Kubeflow's training operator"


def test_a_cluster_without_a_kinds_crd_skips_it_or_names_it_with_exit_3(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A second, fresh API server: no CRD installed there, then only TFJob's."""
    with ControlPlane(control_plane.assets) as bare:
        plain = Cli(bare.kubeconfig_path, "default", tmp_path)
        tf_file = str(plain.write(job_document("x")))
        torch_file = str(plain.write(pytorch_document("t")))
        for args in (["get"], ["get", "x"], ["wait", "x"]):
            result = plain(*args)
            assert result.returncode == 3, result.stderr
            line = _single_line(result)
            assert line.startswith(
                "tfjob: the cluster has none of the resources tfjobs.kubeflow.org, "
                "pytorchjobs.kubeflow.org"
            ), line
            assert line.endswith(f"(no CRD of a job kind is installed): {_FIX}"), line
        submitted = plain("submit", tf_file)
        assert submitted.returncode == 3
        assert _single_line(submitted) == _missing("tfjobs.kubeflow.org", "TFJob")

        with Client(KubeConfig.from_file(bare.kubeconfig_path)) as admin:
            apply_documents(admin, load_manifest(MANIFESTS_BASE / "crd.yaml"))
        listed = wait_for(lambda: (r := plain("get")).returncode == 0 and r, 30.0)
        assert listed.stdout == "" and listed.stderr.strip() == "No jobs in namespace default."
        missing_torch = _missing("pytorchjobs.kubeflow.org", "PyTorchJob")
        for args in (["get", "pytorchjobs"], ["logs", "pytorchjob/t"], ["submit", torch_file]):
            result = plain(*args)
            assert result.returncode == 3, (args, result.stderr)
            assert _single_line(result) == missing_torch
        unknown = plain("get", "x")  # looked for among the kinds installed: TFJob
        assert unknown.returncode == 2
        assert _single_line(unknown) == 'tfjob: no TFJob "x" in namespace default'
        assert plain("submit", tf_file).returncode == 0
        assert [line.split()[:2] for line in plain("get").stdout.splitlines()[1:]] == [
            ["x", "TFJob"]
        ]


def test_unknown_jobs_are_one_line_and_exit_2(cli: Cli, jobs: Jobs) -> None:
    for args in (["logs", "ghost"], ["wait", "ghost"], ["delete", "ghost"], ["get", "ghost"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert is_no_job(_single_line(result), "ghost", cli.namespace), result.stderr
