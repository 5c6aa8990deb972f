"""`tfjob run` and `tfjob render` of an MPIJob: run refuses it with a clear message
(exit 2, nothing started: its launcher reaches the workers through `kubectl exec`,
which a local run does not stand in for); render prints what a cluster gets, the
launcher's objects included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from testkit.tfjob_cli import tfjob, write


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


def test_run_refuses_an_mpijob_clearly_and_starts_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    path = write(tmp_path / "job.yaml", _mpijob("pi"))
    result = tfjob("run", str(path), "--run-dir", str(run_dir))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "invalid MPIJob" in result.stderr
    assert "MPI jobs cannot run locally" in result.stderr and "fix:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not run_dir.exists()


def test_render_prints_the_launchers_objects_and_pods(tmp_path: Path) -> None:
    result = tfjob("render", str(write(tmp_path / "job.yaml", _mpijob("pi"))))
    assert result.returncode == 0, result.stderr
    objects = list(yaml.safe_load_all(result.stdout))
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
