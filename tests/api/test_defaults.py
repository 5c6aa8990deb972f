"""Defaulting, case by case as upstream's TestSetTypeNames and TestSetDefaultTFJob."""

from __future__ import annotations

import pytest

from testkit.builders import container, job, replica
from tfjob.frameworks.registry import with_defaults

PORT = {"name": "tfjob-port", "containerPort": 2222}


@pytest.mark.parametrize("key", ["WORKER", "worker", "wOrKeR"])
def test_type_names_are_made_canonical(key: str) -> None:
    assert list(with_defaults(job(**{key: replica(1)})).spec.tf_replica_specs) == ["Worker"]


def test_ps_and_evaluator_cases() -> None:
    defaulted = with_defaults(job(ps=replica(1), evaluator=replica(1)))
    assert sorted(defaulted.spec.tf_replica_specs) == ["Evaluator", "PS"]


def test_replicas_restart_policy_clean_pod_policy_success_policy() -> None:
    defaulted = with_defaults(job(Worker=replica(None)))
    worker = defaulted.spec.tf_replica_specs["Worker"]
    assert worker.replicas == 1
    assert worker.restart_policy == "Never"
    assert defaulted.spec.run_policy.clean_pod_policy == "None"
    assert defaulted.spec.success_policy == ""


def test_default_port_is_added_to_the_tensorflow_container() -> None:
    spec = {"template": {"spec": {"containers": [container("sidecar"), container()]}}}
    containers = (
        with_defaults(job(Worker=spec))
        .spec.tf_replica_specs["Worker"]
        .template["spec"]["containers"]
    )
    assert "ports" not in containers[0]
    assert containers[1]["ports"] == [PORT]


def test_existing_default_port_is_kept() -> None:
    custom = {"name": "tfjob-port", "containerPort": 3000}
    spec = replica(1)
    spec["template"]["spec"]["containers"][0]["ports"] = [custom]
    ports = (
        with_defaults(job(Worker=spec))
        .spec.tf_replica_specs["Worker"]
        .template["spec"]["containers"][0]["ports"]
    )
    assert ports == [custom]


def test_port_with_another_name_still_gets_tfjob_port() -> None:
    other = {"name": "other", "containerPort": 2222}
    spec = replica(1)
    spec["template"]["spec"]["containers"][0]["ports"] = [other]
    ports = (
        with_defaults(job(Worker=spec))
        .spec.tf_replica_specs["Worker"]
        .template["spec"]["containers"][0]["ports"]
    )
    assert ports == [other, PORT]


def test_without_tensorflow_container_the_first_gets_the_port() -> None:
    spec = {"template": {"spec": {"containers": [container("a"), container("b")]}}}
    containers = (
        with_defaults(job(Worker=spec))
        .spec.tf_replica_specs["Worker"]
        .template["spec"]["containers"]
    )
    assert containers[0]["ports"] == [PORT] and "ports" not in containers[1]


def test_defaulting_leaves_the_stored_job_untouched() -> None:
    original = job(worker=replica(None))
    with_defaults(original)
    assert list(original.spec.tf_replica_specs) == ["worker"]
    assert original.spec.tf_replica_specs["worker"].replicas is None
    assert "ports" not in original.spec.tf_replica_specs["worker"].template["spec"]["containers"][0]
