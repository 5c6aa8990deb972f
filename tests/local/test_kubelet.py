"""LocalKubelet on real processes: pod phases, exit codes, in-place restarts, deletion."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from testkit.local_harness import Harness, gone_within, pod_manifest, python
from tfjob.api.observed import Pod


def _terminated(pod: Pod) -> tuple[int, str]:
    state = pod.status.container_statuses[0].state.terminated
    assert state is not None
    return state.exit_code, state.reason


async def test_success_reports_completed_and_keeps_the_output(harness: Harness) -> None:
    code = "import os; print('hello from', os.environ['TFJOB_POD_NAME'])"
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python(code)))
    pod = await harness.phase("j-worker-0", "Succeeded")
    assert _terminated(pod) == (0, "Completed")
    assert ("worker-0", "hello from j-worker-0") in harness.lines
    assert "hello from j-worker-0" in (harness.log_dir / "j-worker-0.log").read_text()


async def test_failure_under_never_reports_the_exit_code(harness: Harness) -> None:
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python("raise SystemExit(3)")))
    pod = await harness.phase("j-worker-0", "Failed")
    assert _terminated(pod) == (3, "Error")
    assert pod.status.container_statuses[0].restart_count == 0


async def test_death_by_signal_is_128_plus_the_signal(harness: Harness) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python(code)))
    pod = await harness.phase("j-worker-0", "Failed")
    assert _terminated(pod) == (137, "Error")


async def test_on_failure_restarts_in_place_until_success(harness: Harness, tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    code = (
        "import pathlib, sys; m = pathlib.Path(sys.argv[1])\n"
        "if not m.exists(): m.touch(); print('first try'); sys.exit(1)\n"
        "print('second try')"
    )
    container = python(code, args=[str(marker)])
    harness.kubelet.create_pod(pod_manifest("j-worker-0", container, restart_policy="OnFailure"))
    running = await harness.phase("j-worker-0", "Running")
    assert running.metadata.name == "j-worker-0"
    pod = await harness.phase("j-worker-0", "Succeeded")
    assert pod.status.container_statuses[0].restart_count == 1
    log = (harness.log_dir / "j-worker-0.log").read_text()
    assert log.index("first try") < log.index("restarted in place") < log.index("second try")


async def test_always_restarts_even_after_success(harness: Harness) -> None:
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python("pass"), restart_policy="Always"))
    await harness.until(
        lambda: (
            (p := harness.pod("j-worker-0")) is not None
            and p.status.container_statuses[0].restart_count >= 1
        )
    )
    pod = harness.pod("j-worker-0")
    assert pod is not None and pod.status.phase == "Running"


async def test_the_program_sees_its_command_as_written(harness: Harness) -> None:
    """argv[0] is the command's first word, as a container runtime passes it, not the
    path found on PATH (Open MPI's mpirun takes a full path as its --prefix)."""
    folder = str(Path(sys.executable).parent)
    name = Path(sys.executable).name
    container = {
        "name": "tensorflow",
        "image": "ignored",
        "command": [name, "-c", "import sys; print('ARGV0', sys.orig_argv[0])"],
        "env": [{"name": "PATH", "value": folder}],
    }
    harness.kubelet.create_pod(pod_manifest("j-worker-0", container))
    await harness.phase("j-worker-0", "Succeeded")
    assert ("worker-0", f"ARGV0 {name}") in harness.lines


async def test_replica_environment(harness: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    code = (
        "import os\n"
        "for k in ['TFJOB_PORT','TFJOB_REPLICA_TYPE','TFJOB_REPLICA_INDEX','PYTHONUNBUFFERED',"
        "'NAME','NS','TEAM','NOTE','GREETING']: print(k, os.environ.get(k))\n"
        "print('CWD', os.getcwd()); print('ARG', __import__('sys').argv[1])"
    )
    env = [
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
        {"name": "GREETING", "value": "hi $(NAME)"},
    ]
    container = python(code, env=env, workingDir="sub", args=["--port=$(TFJOB_PORT)"])
    manifest = pod_manifest("j-worker-1", container, replica=("worker", 1))
    harness.kubelet.create_pod(manifest)
    await harness.phase("j-worker-1", "Succeeded")
    seen = dict(line.split(" ", 1) for _, line in harness.lines)
    assert seen == {
        "TFJOB_PORT": "40002",
        "TFJOB_REPLICA_TYPE": "worker",
        "TFJOB_REPLICA_INDEX": "1",
        "PYTHONUNBUFFERED": "1",
        "NAME": "j-worker-1",
        "NS": "default",
        "TEAM": "ml",
        "NOTE": "hello",
        "GREETING": "hi j-worker-1",
        "CWD": str(tmp_path / "sub"),
        "ARG": "--port=40002",
    }


async def test_a_command_that_vanished_fails_the_pod_with_start_error(harness: Harness) -> None:
    container = {"name": "tensorflow", "command": ["no-such-program-tfjob"]}
    harness.kubelet.create_pod(pod_manifest("j-worker-0", container))
    pod = await harness.phase("j-worker-0", "Failed")
    assert _terminated(pod) == (127, "StartError")


async def test_delete_terminates_gracefully_then_kills(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: print('got SIGTERM', flush=True))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(1)"
    )
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python(code), grace=1))
    await harness.until(lambda: ("worker-0", "ready") in harness.lines)
    began = time.monotonic()
    harness.kubelet.delete_pod("j-worker-0")
    pod = harness.pod("j-worker-0")
    assert pod is not None and pod.metadata.deletion_timestamp is not None
    await harness.until(lambda: harness.pod("j-worker-0") is None)
    took = time.monotonic() - began
    assert ("worker-0", "got SIGTERM") in harness.lines
    assert 0.9 <= took < 3.0


async def test_leftover_processes_of_a_container_are_killed_when_it_exits(
    harness: Harness,
) -> None:
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid)"
    )
    harness.kubelet.create_pod(pod_manifest("j-worker-0", python(code)))
    await harness.phase("j-worker-0", "Succeeded")
    grandchild = int(harness.lines[0][1])
    assert gone_within([grandchild])


async def test_shutdown_stops_every_process(harness: Harness) -> None:
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    for i in range(3):
        harness.kubelet.create_pod(
            pod_manifest(f"j-worker-{i}", python(code), replica=("worker", i))
        )
    await harness.until(lambda: len(harness.lines) == 3)
    pids = [int(line) for _, line in harness.lines]
    await harness.kubelet.shutdown()
    assert harness.kubelet.pods() == []
    assert gone_within(pids)
