"""Loading TFJobs from YAML/JSON, and every kind of bad input, named by its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from testkit import fast_yaml
from tfjob.api.errors import InvalidJob
from tfjob.api.types import to_dict
from tfjob.frameworks.load import load_jobs

FIXTURES = Path(__file__).parents[1] / "fixtures"

GOOD = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: good}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: tensorflow, image: tf, command: [python, train.py]}]
"""


def errors_of(text: str, **kw: bool) -> list[str]:
    with pytest.raises(InvalidJob) as caught:
        load_jobs(text, "job.yaml", **kw)
    return [str(e) for e in caught.value.errors]


def mutate(change: str) -> str:
    """GOOD with one edit applied as a Python expression on the parsed document `d`."""
    d = fast_yaml.load(GOOD)
    exec(change, {"d": d})
    return yaml.safe_dump(d)


def test_good_job_loads() -> None:
    (job,) = load_jobs(GOOD, "job.yaml")
    assert job.metadata.name == "good"
    assert job.spec.tf_replica_specs["Worker"].replicas == 2


def test_json_and_multi_document_files() -> None:
    as_json = json.dumps(fast_yaml.load(GOOD))
    assert len(load_jobs(as_json, "job.json")) == 1
    second = GOOD.replace("name: good", "name: second")
    jobs = load_jobs(GOOD + "---\n" + second, "jobs.yaml")
    assert [j.metadata.name for j in jobs] == ["good", "second"]


def test_fixtures_load() -> None:
    for path in FIXTURES.glob("*.yaml"):
        assert load_jobs(path.read_text(), path.name)


def test_unknown_template_fields_survive_a_round_trip() -> None:
    text = (FIXTURES / "chief-worker-evaluator.yaml").read_text()
    (job,) = load_jobs(text, "x")
    original = fast_yaml.load(text)
    assert to_dict(job)["spec"]["tfReplicaSpecs"] == original["spec"]["tfReplicaSpecs"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: [1, 2", "(file): not valid YAML or JSON at line 2, column 1"),
        ("", "(file): contains no TFJob"),
        ("- 1\n- 2\n", "(document): is not a mapping"),
        (GOOD.replace("kubeflow.org/v1", "kubeflow.org/v1beta2"), "apiVersion: must be 'kubeflow.org/v1'"),
        (GOOD.replace("kind: TFJob", "kind: MXJob"),
         "kind: must be one of 'TFJob', 'PyTorchJob', 'JAXJob', 'XGBoostJob', 'PaddleJob', 'MPIJob', got 'MXJob'"),
        (mutate("d['spec']['tfReplicaSpecs']['Worker']['replicas'] = -1"),
         "spec.tfReplicaSpecs[Worker].replicas: must be >= 0, got -1; fix: set replicas to 0 or more"),
        (mutate("d['spec']['tfReplicaSpecs']['Worker']['replicas'] = 'two'"),
         "spec.tfReplicaSpecs[Worker].replicas: expected `int | null`, got `str`"),
        (mutate("d['spec']['tfReplicaSpecs']['Worker']['restartPolicy'] = 'Sometimes'"),
         "spec.tfReplicaSpecs[Worker].restartPolicy: unknown value 'Sometimes'; fix: use one of Always, OnFailure, Never, ExitCode"),
        (mutate("d['spec']['tfReplicaSpecs']['Worker']['template']['spec']['containers'][0]['name'] = 'main'"),
         "spec.tfReplicaSpecs[Worker].template.spec.containers: must have at least one container with name tensorflow (found 'main')"),
        (mutate("d['spec']['tfReplicaSpecs']['Chief'] = d['spec']['tfReplicaSpecs']['Master'] = d['spec']['tfReplicaSpecs']['Worker']"),
         "spec.tfReplicaSpecs: must not have more than 1 Chief or Master role"),
        (mutate("d['spec']['runPolicy'] = {'cleanPodPolicy': 'Sometimes'}"),
         "spec.runPolicy.cleanPodPolicy: unknown value 'Sometimes'; fix: use one of All, Running, None"),
        (mutate("d['spec']['runPolicy'] = {'managedBy': 'me'}"), "spec.runPolicy.managedBy: unsupported value 'me'"),
        (mutate("d['spec']['runPolicy'] = {'backoffLimit': -2}"), "spec.runPolicy.backoffLimit: must be >= 0, got -2"),
        (mutate("d['spec']['cleanPodPolicy'] = 'All'"), "spec.cleanPodPolicy: is not a field of spec in kubeflow.org/v1"),
        (mutate("d['spec']['successPolicy'] = 'Most'"), "spec.successPolicy: unknown value 'Most'"),
        (mutate("d['metadata']['name'] = 'Bad_Name'"), "metadata.name: 'Bad_Name' is not a DNS-1035 label"),
        (mutate("d['metadata'] = {}"), "metadata.name: is required"),
        (mutate("d['spec']['tfReplicaSpecs'] = {}"), "spec.tfReplicaSpecs: is required"),
        (mutate("d['spec']['tfReplicaSpecs']['worker'] = d['spec']['tfReplicaSpecs']['Worker']"),
         "spec.tfReplicaSpecs: keys 'Worker', 'worker' name the same replica type 'Worker'"),
        (mutate("d['spec']['tfReplicaSpecs']['Worker']['template']['spec']['containers'][0].pop('image')"),
         "spec.tfReplicaSpecs[Worker].template.spec.containers[0].image: must be required"),
    ],
)  # fmt: skip
def test_bad_input_names_the_field_and_the_fix(text: str, expected: str) -> None:
    assert any(expected in error for error in errors_of(text)), errors_of(text)


def test_generated_names_over_63_characters_are_rejected_with_the_limit() -> None:
    name = "a" * 55
    errors = errors_of(
        mutate(
            f"d['metadata']['name'] = {name!r}; d['spec']['tfReplicaSpecs']['Worker']['replicas'] = 12"
        )
    )
    assert errors == [
        f"spec.tfReplicaSpecs[Worker]: generated pod/service name '{name}-worker-11' is 65 characters, "
        "over Kubernetes' limit of 63; fix: shorten metadata.name to at most 53 characters"
    ]


def test_no_containers_gives_upstreams_two_errors() -> None:
    errors = errors_of(
        mutate("d['spec']['tfReplicaSpecs']['Worker']['template']['spec']['containers'] = []")
    )
    assert [e.split(";")[0] for e in errors] == [
        "spec.tfReplicaSpecs[Worker].template.spec.containers: must be specified",
        "spec.tfReplicaSpecs[Worker].template.spec.containers: must have at least one container with name tensorflow",
    ]


def test_several_errors_are_reported_together_with_the_source() -> None:
    text = mutate(
        "w = d['spec']['tfReplicaSpecs']['Worker']; w['replicas'] = -1; w['restartPolicy'] = 'X';"
        "w['template']['spec']['containers'][0]['name'] = 'main'"
    )
    with pytest.raises(InvalidJob) as caught:
        load_jobs(text, "job.yaml")
    message = str(caught.value)
    assert message.startswith("job.yaml: invalid TFJob (3 errors):\n  - ")
    assert "replicas" in message and "restartPolicy" in message and "tensorflow" in message


def test_errors_in_a_multi_document_file_name_the_document() -> None:
    bad = GOOD.replace("name: good", "name: Bad")
    errors = errors_of(GOOD + "---\n" + bad)
    assert errors[0].startswith("document 2: metadata.name")


def test_image_is_optional_for_the_local_runtime() -> None:
    text = mutate(
        "d['spec']['tfReplicaSpecs']['Worker']['template']['spec']['containers'][0].pop('image')"
    )
    assert load_jobs(text, "job.yaml", require_image=False)
