"""`tfjob convert`: v1 jobs as TrainJobs on standard output, what is lost on standard
error, and --strict's exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testkit import fast_yaml
from testkit.tfjob_cli import REPO, tfjob

LOSSLESS = """
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: lossless}
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
            - {name: jax, image: registry.local/jax:1, command: [python3, train.py]}
"""


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in fast_yaml.load_all(text) if d is not None]


def test_a_job_needing_its_own_runtime_prints_it_first_and_names_the_losses() -> None:
    result = tfjob("convert", str(REPO / "examples/tensorflow/parameter_server.yaml"))
    assert result.returncode == 0, result.stderr
    runtime, trainjob = documents(result.stdout)
    assert (runtime["kind"], trainjob["kind"]) == ("TrainingRuntime", "TrainJob")
    assert trainjob["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    lines = result.stderr.splitlines()
    assert all(line.startswith("tfjob convert: ") for line in lines)
    assert any("spec.tfReplicaSpecs.PS.restartPolicy: 'ExitCode'" in line for line in lines)
    assert any("spec.runPolicy.cleanPodPolicy" in line for line in lines)


def test_strict_fails_when_anything_is_lost_and_still_prints(tmp_path: Path) -> None:
    result = tfjob("convert", "--strict", str(REPO / "examples/pytorch/ddp.yaml"))
    assert result.returncode == 1
    assert [d["kind"] for d in documents(result.stdout)] == ["TrainingRuntime", "TrainJob"]
    assert "spec.runPolicy.cleanPodPolicy" in result.stderr


def test_strict_passes_lossless_jobs_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(LOSSLESS + "---\n" + LOSSLESS.replace("lossless", "second"))
    result = tfjob("convert", "--strict", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    printed = [(d["kind"], d["metadata"]["name"]) for d in documents(result.stdout)]
    assert printed == [
        ("TrainingRuntime", "lossless"),
        ("TrainJob", "lossless"),
        ("TrainingRuntime", "second"),
        ("TrainJob", "second"),
    ]


def test_a_job_on_a_shipped_runtime_prints_the_trainjob_alone(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(LOSSLESS.replace("restartPolicy: Never", "restartPolicy: OnFailure"))
    result = tfjob("convert", str(path))
    assert result.returncode == 0, result.stderr
    [trainjob] = documents(result.stdout)
    assert trainjob["spec"]["runtimeRef"]["name"] == "jax-distributed"
    assert trainjob["spec"]["trainer"]["numNodes"] == 2
    assert "at most 6 times" in result.stderr  # a Job's default backoffLimit


def test_bad_input_is_refused_with_status_2(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(LOSSLESS.replace("replicas: 2", "replicas: two"))
    result = tfjob("convert", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "replicas" in result.stderr
