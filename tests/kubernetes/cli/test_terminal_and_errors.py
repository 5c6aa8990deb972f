"""What the cluster commands show on a terminal, and how they fail on bad input: one
line on stderr, no traceback, an exit status that says which kind of problem."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from testkit import fast_yaml
from testkit.cluster import Cluster, Nodes
from testkit.cluster_cli import LIMIT, Cli, ending_job, is_no_job, job_document
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
    config = fast_yaml.load(kubeconfig.read_text())
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


def test_unknown_jobs_are_one_line_and_exit_2(cli: Cli, jobs: Jobs) -> None:
    for args in (["logs", "ghost"], ["wait", "ghost"], ["delete", "ghost"], ["get", "ghost"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert is_no_job(_single_line(result), "ghost", cli.namespace), result.stderr
