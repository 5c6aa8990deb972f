"""TFJobs and PyTorchJobs built only from the models of Kubeflow's Python SDK
(``kubeflow-training``), the way a user of the SDK writes them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

IMAGE = "registry.example/tensorflow:2.16-sdk-test"
TORCH_IMAGE = "registry.example/pytorch:2.3-sdk-test"


def build_tfjob(
    sdk: ModuleType,
    name: str,
    *,
    restart_policy: str = "Never",
    labels: dict[str, str] | None = None,
) -> Any:
    """A chief-less TFJob (2 Worker + 1 PS) built only from the SDK's models."""
    m = sdk.models

    def replica(replicas: int, command: str) -> Any:
        return m.KubeflowOrgV1ReplicaSpec(
            replicas=replicas,
            restart_policy=restart_policy,
            template=m.V1PodTemplateSpec(
                spec=m.V1PodSpec(
                    containers=[
                        m.V1Container(
                            name="tensorflow",
                            image=IMAGE,
                            command=["python", "-c", command],
                        )
                    ]
                )
            ),
        )

    return m.KubeflowOrgV1TFJob(
        api_version="kubeflow.org/v1",
        kind="TFJob",
        metadata=m.V1ObjectMeta(name=name, labels=labels),
        spec=m.KubeflowOrgV1TFJobSpec(
            # cleanPodPolicy None keeps the pods after completion, so the tests can
            # still look them up through the SDK.
            run_policy=m.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            tf_replica_specs={
                "Worker": replica(2, "print('training')"),
                "PS": replica(1, "print('serving variables')"),
            },
        ),
    )


def build_pytorchjob(
    sdk: ModuleType,
    name: str,
    *,
    workers: int = 2,
    restart_policy: str = "Never",
    labels: dict[str, str] | None = None,
) -> Any:
    """A PyTorchJob of one Master and `workers` Workers built only from the SDK's
    models, its container named `pytorch` as the SDK's own jobs name it."""
    m = sdk.models

    def replica(replicas: int) -> Any:
        return m.KubeflowOrgV1ReplicaSpec(
            replicas=replicas,
            restart_policy=restart_policy,
            template=m.V1PodTemplateSpec(
                spec=m.V1PodSpec(
                    containers=[
                        m.V1Container(
                            name=sdk.constants.PYTORCHJOB_CONTAINER,
                            image=TORCH_IMAGE,
                            command=["torchrun", "train.py"],
                        )
                    ]
                )
            ),
        )

    return m.KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=m.V1ObjectMeta(name=name, labels=labels),
        spec=m.KubeflowOrgV1PyTorchJobSpec(
            # cleanPodPolicy None keeps the pods after completion (see build_tfjob).
            run_policy=m.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            pytorch_replica_specs={"Master": replica(1), "Worker": replica(workers)},
        ),
    )
