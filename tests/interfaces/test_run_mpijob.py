"""`tfjob run` and `tfjob render` of an MPIJob: without `mpirun` on this machine run
refuses it with a message naming what to install (exit 2, nothing started); render
prints what a cluster gets, the launcher's objects included. (Runs with Open MPI:
tests/mpi.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from testkit import fast_yaml
from testkit.tfjob_cli import TFJOB, tfjob, write


def _mpijob(name: str) -> dict[str, Any]:
    def replica(count: int, *command: str) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "mpi", "image": "mpioperator/mpi-pi"}
        if command:
            container["command"] = list(command)
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 2,
            "mpiReplicaSpecs": {
                "Launcher": replica(1, "mpirun", "-n", "4", "hostname"),
                "Worker": replica(2),
            },
        },
    }


def test_run_without_mpirun_names_what_to_install_and_starts_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    path = write(tmp_path / "job.yaml", _mpijob("pi"))
    empty = tmp_path / "bin"
    empty.mkdir()
    result = subprocess.run(
        [*TFJOB, "run", str(path), "--run-dir", str(run_dir), "--no-view"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": str(empty)},
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "invalid MPIJob" in result.stderr
    assert "needs 'mpirun', which is not on PATH" in result.stderr
    assert "fix: install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin" in result.stderr
    assert "Traceback" not in result.stderr
    assert not run_dir.exists()


def test_render_prints_the_launchers_objects_and_pods(tmp_path: Path) -> None:
    result = tfjob("render", str(write(tmp_path / "job.yaml", _mpijob("pi"))))
    assert result.returncode == 0, result.stderr
    objects = list(fast_yaml.load_all(result.stdout))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "pi-launcher"),
        ("ConfigMap", "pi-config"),
        ("Role", "pi-launcher"),
        ("RoleBinding", "pi-launcher"),
        ("Pod", "pi-launcher"),
        ("Pod", "pi-worker-0"),
        ("Pod", "pi-worker-1"),
    ]
    config = objects[1]["data"]
    assert config["hostfile"] == "pi-worker-0 slots=2\npi-worker-1 slots=2\n"
