"""Kubeflow's own Python SDK (``kubeflow-training`` 1.9.x) works against our operator.

A user with an existing Kubeflow workflow builds a ``TrainingClient(job_kind="TFJob")``
and calls create/get/list/wait/update/delete on it; nothing in the SDK may need to
change. Everything here is real: the SDK talks to a real
kube-apiserver through the kubernetes client, our operator runs as a subprocess with
its ServiceAccount's RBAC, and the pods run on the test cluster: kube-scheduler binds
them to a kwok node, kwok runs them and ends them with the exit code a test asks for,
and the garbage collector removes a deleted job's pods.

The job is chief-less, 2 workers and 1 parameter server, with the
main container named ``tensorflow``; worker-0 is then the ``job-role=master`` pod.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from testkit.cluster import KwokPods
from testkit.helpers import container, replica, tfjob
from testkit.sdk_jobs import IMAGE, build_tfjob

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
POLL = 1  # seconds between the SDK's GETs (its polling_interval is typed int)
WAIT = 60
TTL = 10  # ttlSecondsAfterFinished the update sets


def pod_name(job: str, replica_type: str, index: int) -> str:
    return f"{job}-{replica_type}-{index}"


def all_pod_names(job: str) -> set[str]:
    return {pod_name(job, "worker", 0), pod_name(job, "worker", 1), pod_name(job, "ps", 0)}


def wait_for_pods(kwok: KwokPods, namespace: str, job: str) -> list[str]:
    """The three pods the operator creates for the job, once kwok runs them."""
    return kwok.wait_running(namespace, 3, labels={JOB_NAME_LABEL: job}, timeout=WAIT)


def wait_for_active(client: Any, name: str, expected: dict[str, int]) -> Any:
    """Poll ``get_job`` until ``status.replicaStatuses[type].active`` reads ``expected``.

    The Running condition appears with the first active worker; the counts (and so
    the job's resourceVersion) keep changing until every running pod has been seen.
    """
    deadline = time.monotonic() + WAIT
    while True:
        job = client.get_job(name)
        statuses = job.status.replica_statuses or {}
        active = {t: statuses[t].active if t in statuses else None for t in expected}
        if active == expected:
            return job
        assert time.monotonic() < deadline, f"replicaStatuses active {active} != {expected}"
        time.sleep(0.2)


def conditions_by_type(client: Any, name: str) -> dict[str, str]:
    return {c.type: c.status for c in client.get_job_conditions(name)}


def assert_succeeded_like_upstream_e2e(client: Any, name: str) -> None:
    """Upstream's ``verify_job_e2e``: Created and Succeeded, and nothing else True."""
    conditions = client.get_job_conditions(name)
    assert len(conditions) >= 2, conditions
    assert client.is_job_created(name)
    assert client.is_job_succeeded(name)
    assert not client.is_job_running(name)
    assert not client.is_job_restarting(name)
    assert not client.is_job_failed(name)


def test_create_get_list_and_find_pods(
    training_client: Any, kubeflow_sdk: ModuleType, kube: Client, namespace: str
) -> None:
    """No node to run on here: the job is created and its pods exist, Pending."""
    client = training_client
    name = "mnist"
    client.create_job(build_tfjob(kubeflow_sdk, name, labels={"team": "vision"}))

    created = client.wait_for_job_conditions(
        name, expected_conditions={"Created"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert isinstance(created, kubeflow_sdk.KubeflowOrgV1TFJob)
    assert client.is_job_created(name)
    assert not client.is_job_running(name)  # no pod is running yet
    assert conditions_by_type(client, name)["Created"] == "True"

    job = client.get_job(name)
    assert isinstance(job, kubeflow_sdk.KubeflowOrgV1TFJob)
    assert (job.metadata.name, job.metadata.namespace) == (name, namespace)
    assert job.metadata.labels["team"] == "vision"
    specs = job.spec.tf_replica_specs
    assert {t: s.replicas for t, s in specs.items()} == {"Worker": 2, "PS": 1}
    assert specs["Worker"].template.spec.containers[0].image == IMAGE
    assert job.spec.run_policy.clean_pod_policy == "None"

    listed = client.list_jobs()
    assert [j.metadata.name for j in listed] == [name]
    assert all(isinstance(j, kubeflow_sdk.KubeflowOrgV1TFJob) for j in listed)

    deadline = time.monotonic() + WAIT
    while len(list(kube.list(Pod, namespace=namespace, labels={JOB_NAME_LABEL: name}))) < 3:
        assert time.monotonic() < deadline, "the operator did not create the 3 pods"
        time.sleep(0.1)
    assert set(client.get_job_pod_names(name)) == all_pod_names(name)
    # No chief: worker-0 is the master-role pod, the one get_job_logs reads by default.
    assert client.get_job_pod_names(name, is_master=True) == [pod_name(name, "worker", 0)]
    assert client.get_job_pod_names(name, replica_type="worker", replica_index=1) == [
        pod_name(name, "worker", 1)
    ]
    assert client.get_job_pod_names(name, replica_type="ps") == [pod_name(name, "ps", 0)]
    assert client.get_job_pod_names(name, is_master=True, replica_type="ps") == []

    pods = client.get_job_pods(name)
    assert {p.metadata.name for p in pods} == all_pod_names(name)
    for pod in pods:
        assert [c.name for c in pod.spec.containers] == ["tensorflow"]
        assert pod.metadata.labels[JOB_NAME_LABEL] == name
    (worker1,) = client.get_job_pods(name, replica_type="worker", replica_index=1)
    assert worker1.metadata.labels["training.kubeflow.org/replica-type"] == "worker"
    assert worker1.metadata.labels["training.kubeflow.org/replica-index"] == "1"
    assert "training.kubeflow.org/job-role" not in worker1.metadata.labels
    (master,) = client.get_job_pods(name, is_master=True)
    assert master.metadata.labels["training.kubeflow.org/replica-index"] == "0"
    assert master.metadata.labels["training.kubeflow.org/replica-type"] == "worker"


def test_runs_then_succeeds_and_is_deleted(
    training_client: Any, kubeflow_sdk: ModuleType, kwok: KwokPods, namespace: str
) -> None:
    client = training_client
    name = "mnist"
    client.create_job(build_tfjob(kubeflow_sdk, name))
    wait_for_pods(kwok, namespace, name)

    client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert client.is_job_running(name)
    assert not client.is_job_succeeded(name)
    wait_for_active(client, name, {"Worker": 2, "PS": 1})

    # The workers finish; the parameter server keeps serving (as real PS tasks do).
    kwok.end(namespace, pod_name(name, "worker", 1), 0)
    kwok.end(namespace, pod_name(name, "worker", 0), 0)
    done = client.wait_for_job_conditions(
        name, expected_conditions={"Succeeded"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert any(c.type == "Succeeded" and c.status == "True" for c in done.status.conditions)
    assert done.status.completion_time is not None
    assert done.status.replica_statuses["Worker"].succeeded == 2
    assert_succeeded_like_upstream_e2e(client, name)

    client.delete_job(name)
    with pytest.raises(RuntimeError, match="Not Found"):
        client.get_job(name)
    assert client.list_jobs() == []
    # cleanPodPolicy None kept the pods; the garbage collector removes them with the job.
    deadline = time.monotonic() + WAIT
    while list(kwok.kube.list(Pod, namespace=namespace, labels={JOB_NAME_LABEL: name})):
        assert time.monotonic() < deadline, "the deleted job's pods are still there"
        time.sleep(0.2)


def test_update_job_merge_patch_is_read_back_and_honoured(
    training_client: Any, kubeflow_sdk: ModuleType, kwok: KwokPods, namespace: str
) -> None:
    client = training_client
    name = "mnist"
    client.create_job(build_tfjob(kubeflow_sdk, name, labels={"team": "vision"}))
    wait_for_pods(kwok, namespace, name)
    client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )

    # What a user does: read the job, change it, hand the whole object back. The
    # object carries its resourceVersion, so it is read once the status has settled
    # (every pod seen running); a status write in between would be a 409 Conflict.
    job = wait_for_active(client, name, {"Worker": 2, "PS": 1})
    assert job.spec.run_policy.ttl_seconds_after_finished is None
    job.metadata.labels["team"] = "speech"
    job.metadata.labels["priority"] = "high"
    # Long enough for the SDK's 1 s polling to see it Succeeded under load first.
    job.spec.run_policy.ttl_seconds_after_finished = TTL
    client.update_job(job, name)

    updated = client.get_job(name)
    assert updated.metadata.labels == {"team": "speech", "priority": "high"}
    assert updated.spec.run_policy.ttl_seconds_after_finished == TTL
    assert updated.spec.run_policy.clean_pod_policy == "None"  # untouched fields stay
    assert {t: s.replicas for t, s in updated.spec.tf_replica_specs.items()} == {
        "Worker": 2,
        "PS": 1,
    }
    assert client.is_job_running(name)  # the status survived the patch

    # The operator acts on the patched runPolicy: TTL s after finishing the job is gone.
    for index in (0, 1):
        kwok.end(namespace, pod_name(name, "worker", index), 0)
    client.wait_for_job_conditions(
        name, expected_conditions={"Succeeded"}, polling_interval=POLL, wait_timeout=WAIT
    )
    deadline = time.monotonic() + 30
    while [j.metadata.name for j in client.list_jobs()] == [name]:
        assert time.monotonic() < deadline, f"job not deleted 30 s after its {TTL} s TTL"
        time.sleep(0.5)
    with pytest.raises(RuntimeError, match="Not Found"):
        client.get_job(name)


def test_job_created_without_run_policy_is_readable(
    training_client: Any, kubeconfig: Path, kwok: KwokPods, namespace: str
) -> None:
    """kubectl-style create of a minimal manifest: no runPolicy at all.

    The SDK's model rejects ``run_policy=None``; upstream's operator never persists a
    default, so the SDK cannot read such jobs there. Ours can.
    """
    from kubernetes import client as k8s
    from kubernetes import config

    name = "bare"
    manifest = tfjob(name, None, {"Worker": replica(1, containers=[container(IMAGE)])})
    api = k8s.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
    api.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "tfjobs", manifest)

    job = training_client.get_job(name)
    assert job.spec.run_policy is not None
    assert [j.metadata.name for j in training_client.list_jobs()] == [name]

    (pod,) = kwok.wait_running(namespace, 1, labels={JOB_NAME_LABEL: name}, timeout=WAIT)
    training_client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert training_client.get_job_pod_names(name, is_master=True) == [pod]


def test_failed_worker_fails_the_job_and_the_sdk_raises(
    training_client: Any, kubeflow_sdk: ModuleType, kwok: KwokPods, namespace: str
) -> None:
    client = training_client
    name = "mnist"
    client.create_job(build_tfjob(kubeflow_sdk, name, restart_policy="Never"))
    wait_for_pods(kwok, namespace, name)
    client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )

    kwok.end(namespace, pod_name(name, "worker", 1), 1)
    with pytest.raises(RuntimeError, match=f"TFJob {namespace}/{name} is Failed"):
        client.wait_for_job_conditions(
            name, expected_conditions={"Succeeded"}, polling_interval=POLL, wait_timeout=WAIT
        )
    assert client.is_job_failed(name)
    assert not client.is_job_succeeded(name)
    assert not client.is_job_running(name)
    assert not client.is_job_restarting(name)
    # Waiting for Failed itself returns instead of raising.
    failed = client.wait_for_job_conditions(
        name, expected_conditions={"Failed"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert failed.status.completion_time is not None
    # Under restartPolicy Never the failed pod is kept, not replaced.
    assert set(client.get_job_pod_names(name)) == all_pod_names(name)

    client.delete_job(name)
    assert client.list_jobs() == []
