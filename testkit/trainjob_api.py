"""Kubeflow Trainer's API on the test cluster for tfjob's operator, without Trainer.

``install(plane, kube)`` applies Trainer's CRDs as tfjob ships them
(manifests/base), the role that lets the operator create a TrainJob's Secret, and
the ClusterTrainingRuntimes Trainer ships (from its module, beside the built binary),
and returns those runtimes. Trainer's own controller is not started
(testkit/trainer.py does that), so tfjob's operator is the one reconciling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightkube import Client

from testkit import fast_yaml
from testkit.controlplane import ControlPlane, apply_documents
from testkit.manager_process import install_crds, kustomization_resources
from testkit.trainer import apply_object

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests/base"
TRAINER_CRDS = ("trainjob-crd.yaml", "trainingruntime-crd.yaml", "clustertrainingruntime-crd.yaml")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in fast_yaml.load_all((MANIFESTS / name).read_text()) if d]


def crds() -> list[dict[str, Any]]:
    """Trainer's CRDs as tfjob ships them."""
    return [d for name in TRAINER_CRDS for d in documents(name)]


def install(plane: ControlPlane, kube: Client) -> list[dict[str, Any]]:
    """Trainer's API for tfjob (module docstring); the shipped runtimes applied."""
    install_crds(kube, crds())
    apply_documents(kube, documents("trainjob-secrets-rbac.yaml"))
    config = plane.assets.tool("trainer-controller-manager").resolve().parent / "config"
    shipped = kustomization_resources(config / "runtimes")
    for runtime in shipped:
        apply_object(plane, runtime)
    return shipped
