"""Kubeflow Trainer's API on the test cluster for tfjob's operator, without Trainer.

``install(plane, kube)`` applies Trainer's CRDs as tfjob ships them
(manifests/base), the role that lets the operator create a TrainJob's Secret, and
the ClusterTrainingRuntimes Trainer ships (from its module, beside the built binary),
and returns those runtimes. Trainer's own controller is not started
(testkit/trainer.py does that), so tfjob's operator is the one reconciling.

Until manifests/base/rbac.yaml grants ``patch`` on ConfigMaps (a server-side apply
is a PATCH: the runtime snapshot, an MPI hostfile), ``install`` grants it in a role
of its own, and ``configmap_patch_granted()`` tells the tests whether it had to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from lightkube import Client

from testkit.controlplane import ControlPlane, apply_documents
from testkit.manager_process import install_crds, kustomization_resources
from testkit.trainer import apply_object

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests/base"
TRAINER_CRDS = ("trainjob-crd.yaml", "trainingruntime-crd.yaml", "clustertrainingruntime-crd.yaml")
_ROLE = "tfjob-test-trainjob-configmap-patch"
_CONFIGMAP_PATCH = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": _ROLE},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": _ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": _ROLE},
        "subjects": [
            {"kind": "ServiceAccount", "name": "tfjob-operator", "namespace": "tfjob-system"}
        ],
    },
]


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def configmap_patch_granted() -> bool:
    """Whether manifests/base's ClusterRole lets the operator patch ConfigMaps."""
    for doc in documents("rbac.yaml"):
        if doc.get("kind") != "ClusterRole":
            continue
        for rule in doc.get("rules") or []:
            core = "" in rule.get("apiGroups", [])
            if core and "configmaps" in rule.get("resources", []) and "patch" in rule["verbs"]:
                return True
    return False


def install(plane: ControlPlane, kube: Client) -> list[dict[str, Any]]:
    """Trainer's API for tfjob (module docstring); the shipped runtimes applied."""
    install_crds(kube, [d for name in TRAINER_CRDS for d in documents(name)])
    apply_documents(kube, documents("trainjob-secrets-rbac.yaml"))
    if not configmap_patch_granted():
        apply_documents(kube, _CONFIGMAP_PATCH)
    config = plane.assets.tool("trainer-controller-manager").resolve().parent / "config"
    shipped = kustomization_resources(config / "runtimes")
    for runtime in shipped:
        apply_object(plane, runtime)
    return shipped
