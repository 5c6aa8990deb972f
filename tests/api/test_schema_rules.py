"""The API server's admission checks, evaluated in Python (tfjob.api.schema_rules)."""

from __future__ import annotations

import copy
from typing import Any

from tfjob.api import schema_rules

JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "mnist"},
    "spec": {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "template": {
                    "spec": {"containers": [{"name": "tensorflow", "image": "tf", "args": None}]}
                },
            }
        }
    },
}


def _container(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ][0]
    return container


def test_a_valid_job_passes_and_nulls_are_dropped_as_the_api_server_prunes_them() -> None:
    assert schema_rules.check(JOB) == []


def test_the_image_rule_is_the_one_the_local_runtime_skips() -> None:
    job = copy.deepcopy(JOB)
    del _container(job)["image"]
    [error] = schema_rules.check(job)
    assert error.path == "spec.tfReplicaSpecs[Worker].template.spec.containers"
    assert "image" in error.message
    assert schema_rules.check(job, require_image=False) == []


def test_a_wrong_type_an_unknown_field_and_a_duplicate_key_are_all_reported() -> None:
    job = copy.deepcopy(JOB)
    container = _container(job)
    container["command"] = "python3 train.py"
    container["imagePolicy"] = "Always"
    container["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    found = {(e.path, e.message.split(",")[0]) for e in schema_rules.check(job)}
    where = "spec.tfReplicaSpecs[Worker].template.spec.containers[0]"
    assert found == {
        (f"{where}.command", "must be a list"),
        (f"{where}.imagePolicy", "is not a field of this object"),
        (f"{where}.env[1]", "duplicate value {'name': 'A'} (also at index 0)"),
    }


def test_a_rule_names_the_field_it_is_about() -> None:
    job = copy.deepcopy(JOB)
    job["spec"]["tfReplicaSpecs"]["chief"] = job["spec"]["tfReplicaSpecs"]["Master"] = {
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}
    }
    [error] = schema_rules.check(job)
    assert error.path == "spec.tfReplicaSpecs"
    assert error.message.startswith("must not have more than 1 Chief or Master role")
    assert error.fix == "keep either Chief or Master (they mean the same)"
