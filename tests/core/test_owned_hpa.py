"""The owned-objects seam with PyTorchJob's HorizontalPodAutoscaler: created when
`elasticPolicy.metrics` is set, updated when the job's scaling bounds or metrics
change, deleted when the job is suspended or its metrics are removed; and TFJob,
which owns nothing beyond pods and services, plans no such action. (The HPA field by
field is proven against Kubeflow's operator in tests/kubernetes/operator/
test_mpi_parity.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from testkit import builders
from tfjob.api.observed import OwnedObject
from tfjob.core.plan import CreateOwned, DeleteOwned, Plan, UpdateOwned
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.pytorch import PyTorchJob

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def elastic(*, suspend: bool = False, **policy: Any) -> PyTorchJob:
    worker = {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "pytorch", "image": "torch"}]}},
    }
    document = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "el", "namespace": "ns", "uid": "uid-el"},
        "spec": {
            "elasticPolicy": policy,
            "pytorchReplicaSpecs": {"Worker": worker},
            "runPolicy": {"suspend": suspend},
        },
    }
    job = decode_job(document, PyTorchJob)
    assert isinstance(job, PyTorchJob)
    return job


def plan(job: PyTorchJob, owned: list[OwnedObject] | None = None) -> Plan:
    return reconcile(job, [], [], NOW, Settings(), (), owned or [])


def owned_actions(p: Plan) -> list[Any]:
    return [a for a in p.actions if isinstance(a, CreateOwned | UpdateOwned | DeleteOwned)]


def stored(manifest: dict[str, Any]) -> OwnedObject:
    """The HPA as the API server stores it: its defaults and metadata added."""
    document = msgspec.json.decode(msgspec.json.encode(manifest))
    document["metadata"] |= {"uid": "uid-hpa", "resourceVersion": "9"}
    document["spec"].setdefault("minReplicas", 1)
    return OwnedObject.of(document)


def test_metrics_make_an_hpa_scaling_the_job_between_its_bounds() -> None:
    (create,) = owned_actions(plan(elastic(minReplicas=1, maxReplicas=4, metrics=[CPU])))
    assert isinstance(create, CreateOwned)
    assert create.manifest["metadata"]["name"] == "el"
    assert create.manifest["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "el",
    }
    assert create.manifest["spec"] == {
        "scaleTargetRef": {"kind": "PyTorchJob", "name": "el", "apiVersion": "kubeflow.org/v1"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [CPU],
    }


def test_no_metrics_no_hpa() -> None:
    assert owned_actions(plan(elastic(minReplicas=1, maxReplicas=4))) == []


def test_the_stored_hpa_is_left_alone_until_the_job_changes_it() -> None:
    job = elastic(minReplicas=1, maxReplicas=4, metrics=[CPU])
    (create,) = owned_actions(plan(job))
    hpa = stored(create.manifest)
    assert owned_actions(plan(job, [hpa])) == []
    (update,) = owned_actions(plan(elastic(minReplicas=1, maxReplicas=6, metrics=[CPU]), [hpa]))
    assert isinstance(update, UpdateOwned)
    assert update.manifest["spec"]["maxReplicas"] == 6
    assert update.manifest["metadata"]["resourceVersion"] == "9"


def test_hpa_is_deleted_when_suspended_or_its_metrics_are_removed() -> None:
    (create,) = owned_actions(plan(elastic(minReplicas=1, maxReplicas=4, metrics=[CPU])))
    hpa = stored(create.manifest)
    for job in (
        elastic(suspend=True, minReplicas=1, maxReplicas=4, metrics=[CPU]),
        elastic(minReplicas=1, maxReplicas=4),
    ):
        (delete,) = owned_actions(plan(job, [hpa]))
        assert isinstance(delete, DeleteOwned) and delete.name == "el"


def test_another_jobs_hpa_is_not_this_jobs() -> None:
    (create,) = owned_actions(plan(elastic(minReplicas=1, maxReplicas=4, metrics=[CPU])))
    foreign = stored(create.manifest)
    foreign.document["metadata"]["ownerReferences"][0]["uid"] = "uid-other"
    foreign = OwnedObject.of(foreign.document)
    assert owned_actions(plan(elastic(minReplicas=1, maxReplicas=4), [foreign])) == []


def test_a_tfjob_owns_nothing_beyond_pods_and_services() -> None:
    job = builders.job(Worker=builders.replica(2))
    assert owned_actions(reconcile(job, [], [], NOW, Settings())) == []
