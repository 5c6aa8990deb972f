"""Bad input to `tfjob run` and `tfjob render`: exit status 2, one message naming each
field and its fix, and nothing started."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.tfjob_cli import job, replica, tfjob, write

# A replica that leaves a file behind if it ever runs.
STARTS = "open('STARTED', 'w').close()"


def _good() -> dict[str, Any]:
    return job("bad", Worker=replica(STARTS))


def _containers(doc: dict[str, Any], rtype: str = "Worker") -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = doc["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"][
        "containers"
    ]
    return containers


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            doc = doc[key]
        doc[last] = value

    return change


def _rename_container(doc: dict[str, Any]) -> None:
    _containers(doc)[0]["name"] = "trainer"


def _chief_and_master(doc: dict[str, Any]) -> None:
    specs = doc["spec"]["tfReplicaSpecs"]
    specs["Chief"] = replica(STARTS)
    specs["Master"] = replica(STARTS)


def _missing_command(doc: dict[str, Any]) -> None:
    del _containers(doc)[0]["command"]


def _unknown_command(doc: dict[str, Any]) -> None:
    _containers(doc)[0]["command"] = ["no-such-tool-tfjob", "--flag"]


def _command_as_string(doc: dict[str, Any]) -> None:
    _containers(doc)[0]["command"] = "python3 train.py"


def _secret_env(doc: dict[str, Any]) -> None:
    source = {"secretKeyRef": {"name": "creds", "key": "token"}}
    _containers(doc)[0]["env"] = [{"name": "TOKEN", "valueFrom": source}]


CASES = {
    "wrong apiVersion": (
        _set("apiVersion", "kubeflow.org/v2"),
        "apiVersion: must be 'kubeflow.org/v1'",
    ),
    "wrong kind": (
        _set("kind", "MXJob"),
        "kind: must be one of 'TFJob', 'PyTorchJob', 'JAXJob', 'XGBoostJob', 'PaddleJob', "
        "'MPIJob', got 'MXJob'",
    ),
    "no tensorflow container": (
        _rename_container,
        "must have at least one container with name tensorflow",
    ),
    "Chief and Master": (_chief_and_master, "must not have more than 1 Chief or Master role"),
    "negative replicas": (
        _set("spec.tfReplicaSpecs.Worker.replicas", -1),
        "spec.tfReplicaSpecs[Worker].replicas: must be >= 0, got -1",
    ),
    "unknown restartPolicy": (
        _set("spec.tfReplicaSpecs.Worker.restartPolicy", "Sometimes"),
        "spec.tfReplicaSpecs[Worker].restartPolicy: unknown value 'Sometimes'",
    ),
    "generated names overflow": (
        _set("metadata.name", "a" * 55),
        "over Kubernetes' limit of 63",
    ),
    "command not on PATH": (
        _unknown_command,
        'spec.tfReplicaSpecs[Worker].template.spec.containers[0].command[0]: "no-such-tool-tfjob"'
        " is not an executable on PATH",
    ),
    "command not a list": (
        _command_as_string,
        "containers[0].command: must be a list, got 'python3 train.py'",
    ),
    "env from a secret": (
        _secret_env,
        "containers[0].env[0].valueFrom: secretKeyRef is not supported locally",
    ),
    "no command": (
        _missing_command,
        "spec.tfReplicaSpecs[Worker].template.spec.containers[0].command: no command",
    ),
    # Valid on a cluster, but planning 2**31 local processes used to spin forever.
    "more replicas than one machine runs": (
        _set("spec.tfReplicaSpecs.Worker.replicas", 2**31 - 1),
        "spec.tfReplicaSpecs[Worker].replicas: 2147483647 replicas in all cannot run",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_job_is_refused_before_anything_starts(tmp_path: Path, case: str) -> None:
    change, expected = CASES[case]
    doc = _good()
    change(doc)
    path = write(tmp_path / "job.yaml", doc)
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert "fix:" in result.stderr
    assert not (tmp_path / "STARTED").exists()
    assert not (tmp_path / "run").exists()


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    doc = _good()
    doc["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = -2
    doc["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    _chief_and_master(doc)
    result = tfjob("run", str(write(tmp_path / "job.yaml", doc)), cwd=tmp_path)
    assert result.returncode == 2
    for part in ("Chief or Master", "replicas: must be >= 0", "unknown value 'Sometimes'"):
        assert part in result.stderr


def test_every_command_problem_is_reported_together(tmp_path: Path) -> None:
    doc = _good()
    _missing_command(doc)
    doc["spec"]["tfReplicaSpecs"]["PS"] = replica(STARTS)
    _containers(doc, "PS")[0]["command"] = ["no-such-tool-tfjob"]
    result = tfjob("run", str(write(tmp_path / "job.yaml", doc)), cwd=tmp_path)
    assert result.returncode == 2
    assert "(2 errors)" in result.stderr
    assert "[Worker].template.spec.containers[0].command: no command" in result.stderr
    assert '[PS].template.spec.containers[0].command[0]: "no-such-tool-tfjob"' in result.stderr


@pytest.mark.parametrize("command", ["run", "render"])
def test_not_yaml(tmp_path: Path, command: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: [kubeflow.org/v1\nkind: TFJob\n")
    result = tfjob(command, str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "not valid YAML or JSON" in result.stderr


@pytest.mark.parametrize("command", ["run", "render"])
def test_missing_file(tmp_path: Path, command: str) -> None:
    result = tfjob(command, str(tmp_path / "nowhere.yaml"), cwd=tmp_path)
    assert result.returncode == 2
    assert f"cannot read {tmp_path / 'nowhere.yaml'}: No such file or directory" in result.stderr


def test_run_refuses_a_file_with_several_jobs(tmp_path: Path) -> None:
    path = write(
        tmp_path / "jobs.yaml",
        job("one", Worker=replica(STARTS)),
        job("two", Worker=replica(STARTS)),
    )
    result = tfjob("run", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "holds 2 jobs (one, two)" in result.stderr
    assert not (tmp_path / "STARTED").exists()


def test_render_reports_a_bad_job(tmp_path: Path) -> None:
    doc = _good()
    _rename_container(doc)
    result = tfjob("render", str(write(tmp_path / "job.yaml", doc)))
    assert result.returncode == 2
    assert "must have at least one container with name tensorflow" in result.stderr
    assert result.stdout == ""
