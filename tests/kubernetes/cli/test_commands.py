"""The cluster commands end to end: what a user types, what they see, the exit status.

The API server, its validation, RBAC of the operator and the operator itself are
real; the FakeKubelet (testkit/kubelet.py) reports pod phases as a kubelet would.
"""

from __future__ import annotations

import json
import time

from testkit import fast_yaml
from testkit.cluster_cli import Cli, is_no_job, job_document
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, RunningOperator


def _one_line_error(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# -- submit ----------------------------------------------------------------------------


def test_submit_creates_an_ordinary_tfjob(cli: Cli, jobs: Jobs) -> None:
    document = job_document("plain", 2, runPolicy={"backoffLimit": 3})
    result = cli("submit", str(cli.write(document)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "tfjob.kubeflow.org/plain created"
    stored = jobs.get("plain")
    assert stored is not None
    # As written (the CRD's own defaults aside): nothing added or dropped by tfjob.
    assert stored["spec"]["tfReplicaSpecs"] == document["spec"]["tfReplicaSpecs"]
    assert stored["spec"]["runPolicy"] == {"backoffLimit": 3, "suspend": False}


def test_submit_refuses_a_bad_file_before_sending_anything(cli: Cli, jobs: Jobs) -> None:
    document = job_document("bad")
    document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].pop("image")
    result = cli("submit", str(cli.write(document)))
    assert result.returncode == 2
    assert "image" in result.stderr and "Traceback" not in result.stderr
    assert jobs.get("bad") is None


def test_a_refusal_by_the_cluster_is_one_line_and_exit_2(cli: Cli, jobs: Jobs) -> None:
    path = cli.write(job_document("twice"))
    assert cli("submit", str(path)).returncode == 0
    again = cli("submit", str(path))
    assert again.returncode == 2
    line = _one_line_error(again.stderr)
    assert "refused twice" in line and "already exists" in line
    assert "tfjob delete tfjob/twice first" in line


def test_submit_follow_shows_pods_events_and_exits_0_on_success(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    running = cli.start("submit", str(cli.write(job_document("ok", 2))), "--follow")
    jobs.wait_pods({"ok-worker-0", "ok-worker-1"})
    for pod in ("ok-worker-0", "ok-worker-1"):
        kubelet.run(cli.namespace, pod)
    for pod in ("ok-worker-0", "ok-worker-1"):
        kubelet.succeed(cli.namespace, pod)
    assert running.wait() == 0, running.output()
    output = running.output()
    assert "[tfjob] created TFJob ok in namespace" in output
    assert "Ctrl-C stops following, not the job" in output
    assert "[tfjob] Created pod: ok-worker-0" in output
    assert "\x1b" not in output  # not a terminal: plain lines, no table


def test_submit_follow_exits_1_with_the_reason_when_the_job_fails(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    running = cli.start("submit", str(cli.write(job_document("boom"))), "--follow")
    jobs.wait_pods({"boom-worker-0"})
    kubelet.run(cli.namespace, "boom-worker-0")
    kubelet.fail(cli.namespace, "boom-worker-0", exit_code=3)
    assert running.wait() == 1, running.output()
    assert "tfjob: boom failed:" in running.output()


def test_ctrl_c_stops_following_and_leaves_the_job_running(
    operator: RunningOperator, cli: Cli, jobs: Jobs
) -> None:
    running = cli.start("submit", str(cli.write(job_document("stays"))), "--follow")
    running.wait_output(lambda text: "Created pod: stays-worker-0" in text)
    running.interrupt()
    assert running.wait() == 130
    assert "it keeps running on the cluster" in running.output()
    assert "Traceback" not in running.output()
    assert jobs.get("stays") is not None
    assert "stays-worker-0" in jobs.pods()


def test_a_job_deleted_while_followed_or_waited_for_ends_both_with_1(
    operator: RunningOperator, cli: Cli, jobs: Jobs
) -> None:
    following = cli.start("submit", str(cli.write(job_document("brief"))), "--follow")
    following.wait_output(lambda text: "Created pod: brief-worker-0" in text)
    waiting = cli.start("wait", "brief")
    time.sleep(3.0)  # the waiter's first look must find the job (nothing to observe)
    assert cli("delete", "brief").returncode == 0
    for process in (following, waiting):
        assert process.wait() == 1, process.output()
        assert "tfjob: brief was deleted before it finished" in process.output()
        assert "Traceback" not in process.output()


# -- get -------------------------------------------------------------------------------


def test_get_lists_jobs_and_shows_one_with_its_replicas_and_events(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert cli("submit", str(cli.write(job_document("shown", 2)))).returncode == 0
    jobs.wait_pods({"shown-worker-0", "shown-worker-1"})
    kubelet.run(cli.namespace, "shown-worker-0")
    jobs.wait_condition("shown", "Running")

    listing = cli("get")
    assert listing.returncode == 0, listing.stderr
    header, row = listing.stdout.splitlines()
    assert header.split() == [
        "NAME",
        "KIND",
        "STATE",
        "READY",
        "SUCCEEDED",
        "FAILED",
        "RESTARTS",
        "AGE",
    ]
    assert row.split()[:7] == ["shown", "TFJob", "Running", "1/2", "0", "0", "0"]

    wide = cli("get", "-o", "wide")
    assert "Worker:2" in wide.stdout and "REPLICAS" in wide.stdout

    one = cli("get", "shown")
    assert one.returncode == 0, one.stderr
    assert "State:      Running" in one.stdout
    assert "REPLICA" in one.stdout and "RESTARTS" in one.stdout  # the table run shows
    lines = one.stdout.splitlines()
    assert any(line.split()[:3] == ["worker-0", "shown-worker-0", "Running"] for line in lines)
    assert any(line.split()[:3] == ["worker-1", "shown-worker-1", "Pending"] for line in lines)
    assert "SuccessfulCreatePod" in one.stdout  # its recent events


def test_get_o_json_and_yaml_print_the_tfjob_object(cli: Cli, jobs: Jobs) -> None:
    assert cli("submit", str(cli.write(job_document("raw")))).returncode == 0
    stored = jobs.get("raw")
    assert stored is not None
    as_json = json.loads(cli("get", "raw", "-o", "json").stdout)
    as_yaml = fast_yaml.load(cli("get", "raw", "-o", "yaml").stdout)
    for printed in (as_json, as_yaml):
        assert printed["kind"] == "TFJob" and printed["apiVersion"] == "kubeflow.org/v1"
        assert printed["metadata"]["uid"] == stored["metadata"]["uid"]
        assert printed["spec"] == stored["spec"]
        assert "managedFields" not in printed["metadata"]  # as kubectl shows it
    listed = json.loads(cli("get", "-o", "json").stdout)
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["raw"]


def test_get_watch_prints_a_line_per_change(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert cli("submit", str(cli.write(job_document("watched")))).returncode == 0
    watching = cli.start("get", "-w")
    as_yaml = cli.start("get", "watched", "-w", "-o", "yaml")
    watching.wait_output(lambda text: "watched" in text)
    as_yaml.wait_output(lambda text: "kind: TFJob" in text)
    jobs.wait_pods({"watched-worker-0"})
    kubelet.run(cli.namespace, "watched-worker-0")
    kubelet.succeed(cli.namespace, "watched-worker-0")
    assert cli("submit", str(cli.write(job_document("later")))).returncode == 0
    watching.wait_output(lambda text: "Succeeded" in text and "later" in text)
    as_yaml.wait_output(lambda text: "TFJobSucceeded" in text)
    for process in (watching, as_yaml):
        process.interrupt()
        assert process.wait() == 130
    rows = [line.split() for line in watching.output().splitlines()[1:] if line.strip()]
    states = [row[2] for row in rows if row[0] == "watched"]
    assert states[-1] == "Succeeded" and len(states) >= 2  # a line per change
    assert "later" in [row[0] for row in rows]  # a job created meanwhile shows up
    versions = list(fast_yaml.load_all(as_yaml.output()))
    assert len(versions) >= 2 and all(v["metadata"]["name"] == "watched" for v in versions)


def test_get_of_an_unknown_job_is_one_line_and_exit_2(cli: Cli, jobs: Jobs) -> None:
    result = cli("get", "nothing-here")
    assert result.returncode == 2
    assert is_no_job(_one_line_error(result.stderr), "nothing-here", cli.namespace)
    of_a_kind = cli("get", "tfjob", "nothing-here")
    assert _one_line_error(of_a_kind.stderr) == (
        f'tfjob: no TFJob "nothing-here" in namespace {cli.namespace}'
    )


def test_logs_of_a_job_without_pods_says_so(cli: Cli, jobs: Jobs) -> None:
    assert cli("submit", str(cli.write(job_document("podless")))).returncode == 0  # no operator
    result = cli("logs", "podless")
    assert result.returncode == 0
    assert result.stdout == ""
    assert _one_line_error(result.stderr) == (
        "tfjob: podless has no pods (not yet, or no longer): no output"
    )


# -- wait ------------------------------------------------------------------------------


def test_wait_returns_0_when_the_job_succeeds(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert cli("submit", str(cli.write(job_document("waited")))).returncode == 0
    waiting = cli.start("wait", "waited", "--timeout", "50s")
    jobs.wait_pods({"waited-worker-0"})
    kubelet.run(cli.namespace, "waited-worker-0")
    assert waiting.process.poll() is None  # Running is not the end
    kubelet.succeed(cli.namespace, "waited-worker-0")
    assert waiting.wait() == 0, waiting.output()


def test_wait_returns_1_with_the_reason_when_the_job_fails(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert cli("submit", str(cli.write(job_document("doomed")))).returncode == 0
    jobs.wait_pods({"doomed-worker-0"})
    kubelet.run(cli.namespace, "doomed-worker-0")
    kubelet.fail(cli.namespace, "doomed-worker-0", exit_code=1)
    result = cli("wait", "doomed")
    assert result.returncode == 1
    assert _one_line_error(result.stderr).startswith("tfjob: doomed failed:")


def test_wait_for_running_and_timeout(
    operator: RunningOperator, cli: Cli, jobs: Jobs, kubelet: FakeKubelet
) -> None:
    assert cli("submit", str(cli.write(job_document("slow")))).returncode == 0
    timed_out = cli("wait", "slow", "--for", "Running", "--timeout", "1s")
    assert timed_out.returncode == 124
    assert _one_line_error(timed_out.stderr) == "tfjob: slow is not Running after 1s"
    jobs.wait_pods({"slow-worker-0"})
    kubelet.run(cli.namespace, "slow-worker-0")
    assert cli("wait", "slow", "--for", "Running", "--timeout", "30s").returncode == 0


def test_wait_takes_durations_as_kubectl_does(cli: Cli, jobs: Jobs) -> None:
    result = cli("wait", "any", "--timeout", "90")
    assert result.returncode == 2
    assert "not a duration: write e.g. 90s, 5m or 1h30m" in result.stderr


# -- delete ----------------------------------------------------------------------------


def test_delete_wait_returns_once_the_job_is_gone(cli: Cli, jobs: Jobs) -> None:
    assert cli("submit", str(cli.write(job_document("gone")))).returncode == 0
    result = cli("delete", "gone", "--wait", "--timeout", "30s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'tfjob.kubeflow.org "gone" deleted'
    assert jobs.get("gone") is None
    again = cli("delete", "gone")
    assert again.returncode == 2
    assert is_no_job(_one_line_error(again.stderr), "gone", cli.namespace)
