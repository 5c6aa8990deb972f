"""`tfjob logs` and `tfjob submit --follow` reading replicas' output through the API
server's pod log endpoint, served by kwok playing every node's kubelet (its container
logs come from one CRI-format file, testkit/cluster.py: every container of every
pod shows the same lines, so each replica must show each line once, prefixed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from testkit.cluster import Cluster, Nodes
from testkit.cluster_cli import Cli, ending_job
from testkit.helpers import wait_for
from testkit.operators import Jobs, RunningOperator


def _append(cluster: Cluster, *lines: str) -> None:
    """More output, as a container runtime appends it (CRI log format)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with cluster.container_log.open("a") as handle:
        handle.writelines(f"{stamp} stdout F {line}\n" for line in lines)


def _running(jobs: Jobs, *pods: str) -> None:
    wait_for(
        lambda: all(
            jobs.pods().get(p, {}).get("status", {}).get("phase") == "Running" for p in pods
        ),
        30.0,
        message=f"{pods} Running",
    )


def test_logs_prints_each_replica_prefixed_in_time_order(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    nodes.add(1)
    cluster.write_container_log(["loading data", "step 1 loss 0.9", "step 2 loss 0.5"])
    submitted = cli("submit", str(cli.write(ending_job("lines", 2, exit_code=0, run_for="60s"))))
    assert submitted.returncode == 0, submitted.stderr
    _running(jobs, "lines-worker-0", "lines-worker-1")

    result = cli("logs", "lines")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"[{replica}] {line}"
        for replica in ("worker-0", "worker-1")
        for line in ("loading data", "step 1 loss 0.9", "step 2 loss 0.5")
    ]
    only = cli("logs", "lines", "--replica", "worker-1")
    assert only.stdout.splitlines() == [
        "[worker-1] loading data",
        "[worker-1] step 1 loss 0.9",
        "[worker-1] step 2 loss 0.5",
    ]
    unknown = cli("logs", "lines", "--replica", "worker-7")
    assert unknown.returncode == 2
    assert (
        unknown.stderr.strip()
        == "tfjob: lines has no replica worker-7; its replicas: worker-0, worker-1"
    )


def test_logs_follow_streams_new_lines_until_the_job_ends(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    nodes.add(1)
    cluster.write_container_log(["started"])
    submitted = cli("submit", str(cli.write(ending_job("tail", 2, exit_code=0, run_for="8s"))))
    assert submitted.returncode == 0, submitted.stderr
    _running(jobs, "tail-worker-0", "tail-worker-1")
    following = cli.start("logs", "tail", "-f")
    following.wait_output(lambda t: "[worker-0] started" in t and "[worker-1] started" in t)
    _append(cluster, "epoch 1 done")
    following.wait_output(
        lambda t: "[worker-0] epoch 1 done" in t and "[worker-1] epoch 1 done" in t
    )
    assert following.wait() == 0, following.output()  # the job ended: so does -f
    lines = following.output().splitlines()
    assert sorted(lines) == sorted(
        f"[{r}] {text}" for r in ("worker-0", "worker-1") for text in ("started", "epoch 1 done")
    )  # every line once per replica, however often a stream was opened


def test_submit_follow_streams_output_and_exits_with_the_jobs_result(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    nodes.add(1)
    cluster.write_container_log(["training"])
    ok = cli.start(
        "submit", "--follow", str(cli.write(ending_job("good", 2, exit_code=0, run_for="3s")))
    )
    bad = cli.start(
        "submit", "--follow", str(cli.write(ending_job("bad", 1, exit_code=3, run_for="3s")))
    )
    assert ok.wait() == 0, ok.output()
    assert bad.wait() == 1, bad.output()
    assert {"[worker-0] training", "[worker-1] training"} <= set(ok.output().splitlines())
    assert "[worker-0] training" in bad.output().splitlines()
    assert "tfjob: bad failed:" in bad.output()


def test_submit_follow_follows_a_pod_recreated_after_a_retryable_exit(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    """restartPolicy ExitCode: exit 137 makes the operator replace the pod (same name,
    new uid); the replacement's output is followed too, until backoffLimit fails the job."""
    nodes.add(1)
    cluster.write_container_log(["attempt"])
    document = ending_job("again", 1, exit_code=137, run_for="2s")
    document["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    document["spec"]["runPolicy"] = {"backoffLimit": 2}
    following = cli.start("submit", "--follow", str(cli.write(document)))
    assert following.wait() == 1, following.output()
    lines = following.output().splitlines()
    pods = lines.count("[tfjob] Created pod: again-worker-0")
    assert pods >= 2, following.output()
    assert lines.count("[worker-0] attempt") == pods, following.output()  # once per pod


def test_logs_since_leaves_out_older_output(
    operator: RunningOperator, cluster: Cluster, nodes: Nodes, cli: Cli, jobs: Jobs
) -> None:
    nodes.add(1)
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.container_log.write_text(f"{hour_ago} stdout F old news\n")
    _append(cluster, "fresh")
    submitted = cli("submit", str(cli.write(ending_job("recent", 1, exit_code=0, run_for="60s"))))
    assert submitted.returncode == 0, submitted.stderr
    _running(jobs, "recent-worker-0")
    assert cli("logs", "recent").stdout.splitlines() == ["[worker-0] old news", "[worker-0] fresh"]
    assert cli("logs", "recent", "--since", "5m").stdout.splitlines() == ["[worker-0] fresh"]
