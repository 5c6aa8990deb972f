"""Kubeflow's own Python SDK (``kubeflow-training`` 1.9.x) creates, lists, waits for
and deletes a PyTorchJob against tfjob unchanged.

A user builds ``TrainingClient(job_kind="PyTorchJob")`` and calls it as against
Kubeflow's operator. Everything here is real, as in test_kubeflow_sdk.py: the SDK
talks to a real kube-apiserver, `tfjob operator` reconciles as its ServiceAccount,
kube-scheduler binds the pods to a kwok node, and kwok runs and ends them.

The job has a Master and two Workers, the container named ``pytorch``: the Master
is the ``job-role=master`` pod, and decides the job's success (upstream's rule).
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from testkit.cluster import KwokPods
from testkit.sdk_jobs import TORCH_IMAGE, build_pytorchjob

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
POLL = 1  # seconds between the SDK's GETs (its polling_interval is typed int)
WAIT = 60


def _pods(name: str) -> set[str]:
    return {f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"}


def test_create_get_list_wait_succeed_and_delete(
    pytorch_client: Any, kubeflow_sdk: ModuleType, kwok: KwokPods, namespace: str
) -> None:
    client = pytorch_client
    name = "ddp"
    client.create_job(build_pytorchjob(kubeflow_sdk, name, labels={"team": "vision"}))

    created = client.wait_for_job_conditions(
        name, expected_conditions={"Created"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert isinstance(created, kubeflow_sdk.KubeflowOrgV1PyTorchJob)
    job = client.get_job(name)
    assert (job.metadata.name, job.metadata.labels["team"]) == (name, "vision")
    specs = job.spec.pytorch_replica_specs
    assert {t: s.replicas for t, s in specs.items()} == {"Master": 1, "Worker": 2}
    assert specs["Master"].template.spec.containers[0].image == TORCH_IMAGE
    listed = client.list_jobs()
    assert [j.metadata.name for j in listed] == [name]
    assert all(isinstance(j, kubeflow_sdk.KubeflowOrgV1PyTorchJob) for j in listed)

    kwok.wait_running(namespace, 3, labels={JOB_NAME_LABEL: name}, timeout=WAIT)
    client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert client.is_job_running(name)
    assert set(client.get_job_pod_names(name)) == _pods(name)
    assert client.get_job_pod_names(name, is_master=True) == [f"{name}-master-0"]
    assert client.get_job_pod_names(name, replica_type="worker", replica_index=1) == [
        f"{name}-worker-1"
    ]
    for pod in client.get_job_pods(name):
        assert [c.name for c in pod.spec.containers] == ["pytorch"]

    kwok.end(namespace, f"{name}-master-0", 0)  # the Master decides
    done = client.wait_for_job_conditions(
        name, expected_conditions={"Succeeded"}, polling_interval=POLL, wait_timeout=WAIT
    )
    assert done.status.completion_time is not None
    assert done.status.replica_statuses["Master"].succeeded == 1
    assert client.is_job_succeeded(name)
    assert not client.is_job_running(name)
    assert not client.is_job_failed(name)

    client.delete_job(name)
    with pytest.raises(RuntimeError, match="Not Found"):
        client.get_job(name)
    assert client.list_jobs() == []
    deadline = time.monotonic() + WAIT
    while list(kwok.kube.list(Pod, namespace=namespace, labels={JOB_NAME_LABEL: name})):
        assert time.monotonic() < deadline, "the deleted job's pods are still there"
        time.sleep(0.2)


def test_a_failed_master_fails_the_pytorchjob_and_the_sdk_raises(
    pytorch_client: Any, kubeflow_sdk: ModuleType, kwok: KwokPods, namespace: str
) -> None:
    client = pytorch_client
    name = "broken"
    client.create_job(build_pytorchjob(kubeflow_sdk, name, workers=1))
    kwok.wait_running(namespace, 2, labels={JOB_NAME_LABEL: name}, timeout=WAIT)
    client.wait_for_job_conditions(
        name, expected_conditions={"Running"}, polling_interval=POLL, wait_timeout=WAIT
    )
    kwok.end(namespace, f"{name}-master-0", 1)
    with pytest.raises(RuntimeError, match=f"PyTorchJob {namespace}/{name} is Failed"):
        client.wait_for_job_conditions(
            name, expected_conditions={"Succeeded"}, polling_interval=POLL, wait_timeout=WAIT
        )
    assert client.is_job_failed(name)
    assert not client.is_job_succeeded(name)
    client.delete_job(name)
    assert client.list_jobs() == []
