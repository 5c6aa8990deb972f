"""The TrainJob and runtime models: what Kubernetes keeps of them survives a decode
and encode, the CRD's defaults are read where they are missing, and conditions are
written with every field the API requires."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from testkit import fast_yaml
from tfjob.api.training_runtime import MPIPolicy, decode_runtime
from tfjob.api.trainjob import Condition, TrainJobStatus, decode_trainjob, encode

TRAINER_RUNTIMES = (
    Path.home() / "go/pkg/mod/github.com/kubeflow/trainer/v2@v2.3.0/manifests/base/runtimes"
)

TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {
        "name": "tj",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "7",
        "generation": 2,
        "creationTimestamp": "2026-12-01T10:00:00Z",
        "labels": {"a": "b"},
        "finalizers": ["x.io/f"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "1"}],
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Apply",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}},
            }
        ],
    },
    "spec": {
        "runtimeRef": {
            "name": "torch-distributed",
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
        },
        "trainer": {
            "image": "i",
            "command": [],
            "env": [
                {
                    "name": "S",
                    "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}},
                }
            ],
            "numNodes": 2,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}, "claims": [{"name": "c"}]},
        },
        "initializer": {"model": {"storageUri": "hf://m", "secretRef": {"name": "s"}}},
        "runtimePatches": [
            {
                "manager": "kueue.x-k8s.io/manager",
                "time": "2026-12-01T10:00:00Z",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {"template": {"spec": {"nodeSelector": {"z": "a"}}}}
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
        "suspend": False,
        "activeDeadlineSeconds": 600,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    },
    "status": {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "message": "TrainJob is resumed",
                "lastTransitionTime": "2026-12-01T10:01:00Z",
                "observedGeneration": 2,
            }
        ],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
        ],
        "trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": "2026-12-01T10:02:00Z"},
    },
}


def test_trainjob_round_trips() -> None:
    assert encode(decode_trainjob(TRAINJOB)) == TRAINJOB


def test_trainjob_reads_its_fields() -> None:
    job = decode_trainjob(TRAINJOB)
    assert job.spec.trainer is not None and job.spec.trainer.num_nodes == 2
    assert job.spec.trainer.command == []  # given empty: kept, not None
    assert job.spec.managed_by_us
    assert job.status.condition("Suspended") is not None


def test_runtime_ref_defaults_are_the_crds() -> None:
    ref = decode_trainjob({"spec": {"runtimeRef": {"name": "r"}}}).spec.runtime_ref
    assert (ref.group_or_default, ref.kind_or_default) == (
        "trainer.kubeflow.org",
        "ClusterTrainingRuntime",
    )
    assert encode(ref) == {"name": "r"}


def test_condition_writes_every_required_field() -> None:
    cond = Condition(
        type="Suspended", status="True", reason="Suspended", message="", last_transition_time="t"
    )
    assert encode(TrainJobStatus(conditions=[cond])) == {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": "",
                "lastTransitionTime": "t",
            }
        ]
    }


def test_mpi_policy_defaults() -> None:
    policy = msgspec.convert({}, MPIPolicy)
    assert (policy.slots, policy.implementation, policy.mount_path, policy.launcher_as_node) == (
        1,
        "OpenMPI",
        "/root/.ssh",
        False,
    )


@pytest.mark.parametrize(
    "name",
    [
        "torch_distributed",
        "deepspeed_distributed",
        "mlx_distributed",
        "jax_distributed",
        "xgboost_distributed",
    ],
)
def test_shipped_runtime_round_trips(name: str) -> None:
    path = TRAINER_RUNTIMES / f"{name}.yaml"
    if not path.is_file():
        pytest.skip(f"Trainer v2.3.0's module is not downloaded ({path})")
    document = fast_yaml.load(path.read_text())
    runtime = decode_runtime(document)
    assert encode(runtime) == document
    assert runtime.spec.ml_policy is not None
    assert runtime.spec.ml_policy.source in ("torch", "mpi", "jax", "xgboost")
