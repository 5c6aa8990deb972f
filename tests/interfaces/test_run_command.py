"""`tfjob run` end to end: real processes driven by the real core, as a user runs it."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from testkit import fast_yaml
from testkit.run_processes import STUBBORN, gone_within, started_replicas
from testkit.tfjob_cli import REPO, job, replica, tfjob, write


def test_the_ping_example_succeeds_from_any_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = tfjob(
        "run", str(REPO / "examples/ping/job.yaml"), "--run-dir", str(run_dir), cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "[chief-0] chief reached all 2 workers: TF_CONFIG and ports are right" in lines
    assert "[worker-1] worker 1 got the chief's ping" in lines
    assert any(line.startswith("[ps-0] ps 0 listening on 127.0.0.1:") for line in lines)
    for pod in ("ping-chief-0", "ping-ps-0", "ping-worker-0", "ping-worker-1"):
        assert (run_dir / f"{pod}.log").is_file()
    assert "worker 0 got the chief's ping" in (run_dir / "ping-worker-0.log").read_text()
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert final["status"]["conditions"][-1]["type"] == "Succeeded"


def test_output_json_prints_the_final_job_alone_on_stdout(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", job("hello", Worker=replica("print('hi')")))
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"), "-o", "json", "-n", "team")
    assert result.returncode == 0, result.stderr
    final = json.loads(result.stdout)
    assert (final["metadata"]["name"], final["metadata"]["namespace"]) == ("hello", "team")
    assert [c["type"] for c in final["status"]["conditions"]][-1] == "Succeeded"
    assert "[worker-0] hi" in result.stderr.splitlines()


def test_a_failing_worker_fails_the_job_with_exit_status_1(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", job("fail", Worker=replica("raise SystemExit(1)")))
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 1
    assert "TFJob default/fail has failed because 1 Worker replica(s) failed." in result.stderr


def test_exit_code_137_is_retried_and_the_restart_recorded(tmp_path: Path) -> None:
    marker = tmp_path / "killed-once"
    code = (
        f"import os, pathlib, signal; m = pathlib.Path({str(marker)!r})\n"
        "print('port', os.environ['TFJOB_PORT'], flush=True)\n"
        "if not m.exists(): m.touch(); os.kill(os.getpid(), signal.SIGKILL)\n"
        "print('second life')"
    )
    path = write(
        tmp_path / "job.yaml", job("retry", Worker=replica(code, restart_policy="ExitCode"))
    )
    run_dir = tmp_path / "run"
    result = tfjob("run", str(path), "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "[worker-0] second life" in lines
    ports = [line for line in lines if line.startswith("[worker-0] port ")]
    assert len(ports) == 2 and ports[0] == ports[1]  # the recreated pod keeps its port
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert final["status"]["restartCount"] == 1
    assert final["status"]["conditions"][-1]["type"] == "Succeeded"
    assert (run_dir / "retry-worker-0.log").read_text().count("pod retry-worker-0 created") == 2


def test_a_permanent_exit_code_fails_the_job_naming_the_code(tmp_path: Path) -> None:
    code = "raise SystemExit(1)"
    path = write(
        tmp_path / "job.yaml", job("perm", Worker=replica(code, restart_policy="ExitCode"))
    )
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 1
    assert 'job "perm" is failing because "Worker" replica(s) failed.' in result.stderr
    assert "perm-worker-0 exited with code 1" in result.stderr


def test_on_failure_restarts_the_container_in_place(tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    code = (
        f"import pathlib, sys; m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists(): m.touch(); print('failing'); sys.exit(3)\n"
        "print('recovered')"
    )
    path = write(
        tmp_path / "job.yaml", job("inplace", Worker=replica(code, restart_policy="OnFailure"))
    )
    run_dir = tmp_path / "run"
    result = tfjob("run", str(path), "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Created pod: inplace-worker-0" in result.stdout
    assert result.stdout.count("Created pod:") == 1  # the same pod, not a new one
    log = (run_dir / "inplace-worker-0.log").read_text()
    assert log.index("failing") < log.index("restarted in place") < log.index("recovered")


def test_active_deadline_fails_the_job_on_time(tmp_path: Path) -> None:
    code = "import time; print('sleeping', flush=True); time.sleep(60)"
    spec = job("late", {"activeDeadlineSeconds": 2}, Worker=replica(code))
    path = write(tmp_path / "job.yaml", spec)
    began = time.monotonic()
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"), "--grace-period", "1")
    took = time.monotonic() - began
    assert result.returncode == 1
    assert (
        "Job late has failed because it was active longer than specified deadline" in result.stderr
    )
    assert 1.5 < took < 10


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_signal_stops_every_replica(tmp_path: Path, signum: int, status: int) -> None:
    with started_replicas(tmp_path, replicas=2) as (tfjob_process, pids):
        tfjob_process.send_signal(signum)
        assert tfjob_process.wait(timeout=30) == status
        assert gone_within(pids, 5.0)


def test_a_second_ctrl_c_skips_the_grace_period(tmp_path: Path) -> None:
    with started_replicas(tmp_path, 1, code=STUBBORN, grace_period="30") as (process, pids):
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert process.poll() is None  # still waiting for the replica to go
        began = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 130
        assert time.monotonic() - began < 5
        assert gone_within(pids, 5.0)


def test_killing_tfjob_leaves_no_process_behind(tmp_path: Path) -> None:
    with started_replicas(tmp_path, replicas=2) as (tfjob_process, pids):
        assert len(pids) == 5  # 2 replicas, 2 grandchildren, the watchdog
        tfjob_process.send_signal(signal.SIGKILL)
        tfjob_process.wait(timeout=10)
        assert gone_within(pids, 5.0)


@pytest.mark.parametrize("policy", ["None", "All"])
def test_replicas_left_running_at_the_end_are_stopped(tmp_path: Path, policy: str) -> None:
    pid_file = tmp_path / "ps.pid"
    ps = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    worker = f"import os, time\nwhile not os.path.exists({str(pid_file)!r}): time.sleep(0.05)"
    spec = job("cleanup", {"cleanPodPolicy": policy}, PS=replica(ps), Worker=replica(worker))
    path = write(tmp_path / "job.yaml", spec)
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"), "--grace-period", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    deleted_by_the_core = "Deleted pod: cleanup-ps-0" in result.stdout
    assert deleted_by_the_core == (policy == "All")
    assert gone_within([int(pid_file.read_text())], 2.0)
