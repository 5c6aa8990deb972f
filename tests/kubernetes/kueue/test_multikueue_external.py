"""MultiKueue with tfjob as the kinds' job framework, under the real Kueue v0.19.0.

Both Kueue managers have the kinds in ``integrations.externalFrameworks`` (tfjob makes
and keeps their Workloads, ``--kueue-integration=external``) and in
``multiKueue.externalFrameworks`` (MultiKueue's generic adapter dispatches them). A
job with ``spec.managedBy: kueue.x-k8s.io/multikueue`` submitted on the manager
cluster is dispatched: Kueue copies it to the worker cluster with the manager's
Workload made beforehand there; the worker's operator takes that Workload and runs
the job on kwok pods; Kueue copies its status back until it has Succeeded. The
manager's operator makes the job's Workload and nothing else. Every kind in KINDS,
JAXJob too (with no Kueue webhook for the kinds on the worker, nothing refuses its
copy as Kueue's built-in integration does: test_kueue.py), and the v1 MPIJob.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Secret

from testkit.cluster import Cluster, Nodes
from testkit.controlplane import ControlPlaneError, ControlPlaneUnavailable
from testkit.helpers import wait_for
from testkit.kueue import KUEUE_API, QueuedJobs, Queues, Worker, workload_condition
from testkit.kueue import NAMESPACE as KUEUE_NAMESPACE
from testkit.operators import Operators
from tests.kubernetes.kueue.conftest import every_kind

KUEUE_EXTERNAL = True
KUEUE_MULTIKUEUE = True
#: Every kind tfjob serves: with Kueue's generic adapter, MPIJob v1 too (Kueue's own
#: MPIJob integration is v2beta1's).
KINDS = ("TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob")
KUEUE_KINDS = KINDS
#: A worker node's ephemeral storage: an MPIJob launcher's kubectl-delivery init
#: container asks 5Gi, and kwok nodes report none of their own.
NODE_DISK = "50Gi"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def worker_kwok(worker_cluster: Worker) -> Iterator[Cluster]:
    """The worker cluster's scheduler, controller-manager and kwok: its pods run."""
    try:
        started = Cluster(worker_cluster.plane, worker_cluster.plane.assets).start()
    except (ControlPlaneUnavailable, ControlPlaneError) as exc:
        pytest.fail(f"the worker cluster's nodes did not start:\n{exc}", pytrace=False)
    yield started
    started.stop()


@pytest.fixture
def worker_nodes(worker_kwok: Cluster, worker_cluster: Worker, namespace: str) -> Iterator[Nodes]:
    pool = Nodes(worker_cluster.kube, namespace)
    yield pool
    pool.remove_all()


def _multikueue_queue(queues: Queues, kube: Client, worker_cluster: Worker, namespace: str) -> str:
    """A LocalQueue on the manager whose ClusterQueue has an Active MultiKueue
    admission check sending to the worker, which has a queue of the same name."""
    worker = queues.unique("worker")
    kube.create(
        Secret(
            metadata=ObjectMeta(name=worker, namespace=KUEUE_NAMESPACE),
            stringData={"kubeconfig": worker_cluster.plane.kubeconfig_path.read_text()},
        )
    )
    queues.made.append(f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{worker}")
    queues.create(
        f"{KUEUE_API}/multikueueclusters",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
         "metadata": {"name": worker},
         "spec": {"clusterSource": {"kubeConfig": {"location": worker}}}},
    )  # fmt: skip
    queues.create(
        f"{KUEUE_API}/multikueueconfigs",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
         "metadata": {"name": (config := queues.unique("mk"))},
         "spec": {"clusters": [worker]}},
    )  # fmt: skip
    queues.create(
        f"{KUEUE_API}/admissionchecks",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
         "metadata": {"name": (check := queues.unique("mk"))},
         "spec": {"controllerName": MULTIKUEUE,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                 "name": config}}},
    )  # fmt: skip
    wait_for(
        lambda: _true(queues.get(f"{KUEUE_API}/admissionchecks/{check}"), "Active"),
        timeout=30,
        message="the MultiKueue admission check Active (Kueue connected to the worker)",
    )
    cq = queues.cluster_queue(cpu="8", admission_checks=[check])
    queues.wait_active(cq)
    return queues.local_queue(cq)


@every_kind
def test_a_job_handed_to_multikueue_runs_on_the_worker_and_succeeds_on_the_manager(
    queued: QueuedJobs,
    queues: Queues,
    operators: Operators,
    worker_cluster: Worker,
    worker_nodes: Nodes,
    kube: Client,
    namespace: str,
    tmp_path: Path,
) -> None:
    worker_cluster.kube.create(Namespace(metadata=ObjectMeta(name=namespace)))
    on_worker = Queues(worker_cluster.plane, namespace)
    try:
        queue = _multikueue_queue(queues, kube, worker_cluster, namespace)
        on_worker.local_queue(on_worker.cluster_queue(cpu="8"), name=queue)
        worker_nodes.add(1, cpu="8", ephemeral_storage=NODE_DISK)
        operators.start("--kueue-integration=external")
        worker_operator = Operators(worker_cluster.plane.kubeconfig_path, namespace, tmp_path)
        worker_operator.start("--kueue-integration=external")
        try:
            _dispatched_run_and_succeeded(
                queued, QueuedJobs(worker_cluster.plane, namespace, queued.kind), queue
            )
        finally:
            for running in worker_operator.started:
                assert running.stop() == 0, running.log_tail()
    finally:
        on_worker.cleanup()


def _dispatched_run_and_succeeded(queued: QueuedJobs, remote: QueuedJobs, queue: str) -> None:
    manifest = queued.manifest("remote", 2, queue=queue)
    manifest["spec"]["managedBy"] = MULTIKUEUE
    queued.submit(manifest)

    # On the worker: the copy, without spec.managedBy, naming the manager's Workload,
    # which its operator took and runs the job under, on kwok pods.
    running = remote.running_pods("remote", 2, timeout=90)
    copy = remote.get("remote")
    assert "managedBy" not in copy["spec"]
    managers = _workloads(queued)
    assert len(managers) == 1, [w["metadata"]["name"] for w in managers]
    [managers_workload] = managers
    name = managers_workload["metadata"]["name"]
    assert copy["metadata"]["annotations"][PREBUILT] == name
    [workers_workload] = _workloads(remote)
    assert workers_workload["metadata"]["name"] == name
    [owner] = [o for o in workers_workload["metadata"]["ownerReferences"] if o.get("controller")]
    assert (owner["kind"], owner["uid"]) == (queued.kind, copy["metadata"]["uid"])
    assert all(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in running.values())

    # On the manager: admitted (unsuspended), the worker's Running copied onto it, and
    # nothing of the job's made there.
    wait_for(lambda: not queued.suspended("remote"), timeout=30, message="admitted on the manager")
    queued.wait_condition("remote", "Running", timeout=30)
    assert queued.pods("remote") == {}
    assert queued.services("remote") == {}
    writers = _status_writers(remote.get("remote"))  # the worker operator's name
    assert writers, remote.get("remote")["metadata"].get("managedFields")

    remote.end_pods("remote")
    succeeded = queued.wait_condition("remote", "Succeeded", timeout=60)
    assert succeeded["reason"] == f"{queued.kind}Succeeded"  # the worker operator's
    finished = wait_for(
        lambda: _condition(queued.workload("remote"), "Finished"),
        timeout=30,
        message="the manager's Workload Finished",
    )
    assert finished["reason"] == "Succeeded", finished
    assert len(_workloads(queued)) == 1
    assert queued.pods("remote") == {}
    assert queued.services("remote") == {}
    # The status is Kueue's copy: the manager's operator never wrote it (the worker's
    # operator, the same program, did write the copy's).
    assert not writers & _status_writers(queued.get("remote"))


def _workloads(jobs: QueuedJobs) -> list[dict[str, Any]]:
    status, body = jobs.plane.request("GET", f"{KUEUE_API}/namespaces/{jobs.namespace}/workloads")
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


def _status_writers(job: dict[str, Any]) -> set[str]:
    fields = job["metadata"].get("managedFields") or []
    return {f["manager"] for f in fields if f.get("subresource") == "status"}


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    found = workload_condition(obj, kind)
    return found if found is not None and found["status"] == "True" else None


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    return _condition(obj, kind) is not None
