"""PyTorchJob as a user writes it: loading by `kind:`, defaults, validation errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs
from tfjob.frameworks.pytorch import ElasticPolicy, PyTorchJob
from tfjob.frameworks.registry import framework_of, with_defaults

BASE: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pt"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "torch:1"}]}},
            },
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "torch:1"}]}},
            },
        }
    },
}


def document(**spec_changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec_changes)
    return doc


def load(doc: dict[str, Any]) -> PyTorchJob:
    (job,) = load_jobs(yaml.safe_dump(doc), "pt.yaml")
    assert isinstance(job, PyTorchJob)
    return job


def errors_of(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidJob) as raised:
        load_jobs(yaml.safe_dump(doc), "pt.yaml")
    return [str(e) for e in raised.value.errors]


def test_kind_picks_the_model_and_the_framework() -> None:
    job = load(document(nprocPerNode="4", elasticPolicy={"rdzvBackend": "etcd"}))
    assert job.spec.nproc_per_node == "4"
    assert job.spec.elastic_policy == ElasticPolicy(rdzv_backend="etcd")
    assert set(job.spec.replica_specs) == {"Master", "Worker"}
    assert framework_of(job).kind == "PyTorchJob"


def test_a_file_may_mix_kinds() -> None:
    tf = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf"},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "template": {"spec": {"containers": [{"name": "tensorflow", "image": "t"}]}}
                }
            }
        },
    }
    jobs = load_jobs(yaml.safe_dump_all([tf, BASE]), "both.yaml")
    assert [type(j).__name__ for j in jobs] == ["TFJob", "PyTorchJob"]


def test_a_caller_may_accept_only_tfjobs() -> None:
    with pytest.raises(InvalidJob) as raised:
        load_jobs(yaml.safe_dump(BASE), "pt.yaml", kinds=("TFJob",))
    assert [str(e) for e in raised.value.errors] == [
        "kind: must be 'TFJob', got 'PyTorchJob'; fix: set kind: TFJob"
    ]


class TestDefaults:
    def test_shared_defaults_with_the_kinds_values(self) -> None:
        job = with_defaults(load(document()))
        assert job.spec.run_policy.clean_pod_policy == "None"
        for spec in job.spec.pytorch_replica_specs.values():
            assert spec.restart_policy == "OnFailure"
            (container,) = spec.template["spec"]["containers"]
            assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]

    def test_replica_type_keys_are_camel_cased_and_replicas_default_to_one(self) -> None:
        doc = document()
        specs = doc["spec"]["pytorchReplicaSpecs"]
        specs["master"] = specs.pop("Master")
        specs["worker"] = specs.pop("Worker")
        del specs["worker"]["replicas"]
        job = with_defaults(load(doc))
        assert list(job.spec.pytorch_replica_specs) == ["Master", "Worker"]
        assert job.spec.pytorch_replica_specs["Worker"].replicas == 1

    def test_a_users_port_of_that_name_is_kept(self) -> None:
        doc = document()
        container = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
        container[0]["ports"] = [{"name": "pytorchjob-port", "containerPort": 29500}]
        job = with_defaults(load(doc))
        master = job.spec.pytorch_replica_specs["Master"].template["spec"]["containers"][0]
        assert master["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]

    @pytest.mark.parametrize(
        ("nproc", "elastic", "expected"),
        [
            (None, None, "auto"),
            ("8", None, "8"),
            ("gpu", None, "gpu"),
            (None, {}, "auto"),
            (None, {"nProcPerNode": 4}, None),  # left to the deprecated field
        ],
    )
    def test_nproc_per_node(
        self, nproc: str | None, elastic: dict[str, Any] | None, expected: str | None
    ) -> None:
        changes: dict[str, Any] = {}
        if nproc is not None:
            changes["nprocPerNode"] = nproc
        if elastic is not None:
            changes["elasticPolicy"] = elastic
        assert with_defaults(load(document(**changes))).spec.nproc_per_node == expected

    @pytest.mark.parametrize(
        ("elastic", "expected"),
        [
            ({}, (2, 2)),  # neither: the Worker replicas
            ({"minReplicas": 1}, (1, 1)),
            ({"maxReplicas": 5}, (5, 5)),
            ({"minReplicas": 1, "maxReplicas": 3}, (1, 3)),
        ],
    )
    def test_elastic_min_and_max(self, elastic: dict[str, Any], expected: tuple[int, int]) -> None:
        policy = with_defaults(load(document(elasticPolicy=elastic))).spec.elastic_policy
        assert policy is not None
        assert (policy.min_replicas, policy.max_replicas) == expected

    def test_no_elastic_policy_stays_none(self) -> None:
        assert with_defaults(load(document())).spec.elastic_policy is None


def _containers(doc: dict[str, Any], rtype: str) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = doc["spec"]["pytorchReplicaSpecs"][rtype]["template"][
        "spec"
    ]["containers"]
    return containers


def _rename_worker_container(doc: dict[str, Any]) -> dict[str, Any]:
    _containers(doc, "Worker")[0]["name"] = "main"
    return doc


def _add_ps(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["pytorchReplicaSpecs"]["PS"] = copy.deepcopy(
        doc["spec"]["pytorchReplicaSpecs"]["Worker"]
    )
    return doc


def _two_masters(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    return doc


def _no_worker(doc: dict[str, Any]) -> dict[str, Any]:
    del doc["spec"]["pytorchReplicaSpecs"]["Worker"]
    doc["spec"]["elasticPolicy"] = {}
    return doc


def _no_image(doc: dict[str, Any]) -> dict[str, Any]:
    del _containers(doc, "Master")[0]["image"]
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            _rename_worker_container(document()),
            "spec.pytorchReplicaSpecs[Worker].template.spec.containers: must have at least "
            "one container with name pytorch (found 'main'); fix: name the training "
            "container 'pytorch'",
        ),
        (
            _add_ps(document()),
            "spec.pytorchReplicaSpecs[PS]: unsupported replica type 'PS'; "
            "fix: use Master or Worker",
        ),
        (
            _two_masters(document()),
            "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2; "
            "fix: a PyTorchJob has one Master: set replicas to 1",
        ),
        (
            document(nprocPerNode="2", elasticPolicy={"nProcPerNode": 2}),
            "spec.elasticPolicy.nProcPerNode: must not be used with spec.nprocPerNode; "
            "fix: keep spec.nprocPerNode (elasticPolicy.nProcPerNode is deprecated)",
        ),
        (
            document(nprocPerNode="many"),
            "spec.nprocPerNode: must be auto, cpu, gpu or a number of processes, got 'many'",
        ),
        (
            _no_worker(document()),
            "spec.elasticPolicy: needs a Worker replica spec (the workers are the elastic "
            "part); fix: add a Worker replica spec or remove elasticPolicy",
        ),
        (
            document(elasticPolicy={"minReplicas": 4, "maxReplicas": 2}),
            "spec.elasticPolicy.minReplicas: must not exceed maxReplicas, got 4 > 2",
        ),
        (
            document(elasticPolicy={"rdzvBackend": "zookeeper"}),
            "spec.elasticPolicy.rdzvBackend: unknown value 'zookeeper'; "
            "fix: use one of c10d, etcd, etcd-v2",
        ),
        (
            _no_image(document()),
            "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image: must be required",
        ),
        (
            document(pytorchReplicaSpecs={}),
            "spec.pytorchReplicaSpecs: is required and must name at least one replica type; "
            "fix: add e.g. a Worker replica spec with a container named 'pytorch'",
        ),
        (
            document(elasticPolicy={"maxReplicas": "three"}),
            "spec.elasticPolicy.maxReplicas: expected `int | null`, got `str`",
        ),
    ],
)
def test_bad_input_names_the_field_and_the_fix(doc: dict[str, Any], expected: str) -> None:
    errors = errors_of(doc)
    assert any(e.startswith(expected) for e in errors), errors


def test_every_problem_at_once_under_the_kinds_name() -> None:
    doc = _two_masters(_add_ps(document(nprocPerNode="many")))
    with pytest.raises(InvalidJob) as raised:
        load_jobs(yaml.safe_dump(doc), "pt.yaml")
    assert str(raised.value).startswith("pt.yaml: invalid PyTorchJob (3 errors):")
