"""`tfjob convert`'s objects on a real API server: every example of every v1 kind
converts to a TrainJob (and TrainingRuntime) that Trainer's CRDs, as manifests/base
installs them, accept under strict field validation (a dry run: nothing is stored,
no controller needed). tests/core/test_convert.py checks the same locally."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from testkit.controlplane import MANIFESTS_BASE, ControlPlane, apply_documents, load_manifest
from tfjob.core.convert import convert
from tfjob.frameworks.load import load_jobs

REPO = Path(__file__).resolve().parents[2]
PLURALS = {"TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes"}
EXAMPLES = sorted(
    p
    for p in [*REPO.glob("examples/**/*.yaml"), *REPO.glob("tests/fixtures/*.yaml")]
    if "kubeflow.org/v1\n" in p.read_text()
)


@pytest.fixture(scope="module")
def trainer_crds(kube: Client) -> None:
    """TrainJob's and TrainingRuntime's CRDs from manifests/base, Established."""
    names = []
    for stem in ("trainjob", "trainingruntime"):
        [crd] = load_manifest(MANIFESTS_BASE / f"{stem}-crd.yaml")
        apply_documents(kube, [crd])
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + 60
    for name in names:
        while not _established(kube, name):
            assert time.monotonic() < deadline, f"{name} not Established"
            time.sleep(0.2)


def _established(kube: Client, name: str) -> bool:
    crd = kube.get(CustomResourceDefinition, name)
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _create(plane: ControlPlane, namespace: str, document: dict[str, Any]) -> tuple[int, Any]:
    """A dry-run create in the test's namespace (a job may name its own)."""
    document = {**document, "metadata": {**document["metadata"], "namespace": namespace}}
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/"
    query = "?fieldValidation=Strict&dryRun=All"
    return plane.request("POST", path + PLURALS[document["kind"]] + query, body=document)


def test_every_converted_example_is_accepted(
    control_plane: ControlPlane, trainer_crds: None, namespace: str
) -> None:
    refused = []
    kinds = set()
    for path in EXAMPLES:
        for job in load_jobs(path.read_text(), str(path), require_image=True):
            kinds.add(job.kind)
            for document in convert(job).documents:
                status, answer = _create(control_plane, namespace, document)
                if status != 201:
                    refused.append(f"{path.name}: {document['kind']}: {answer}")
    assert not refused, "\n".join(refused)
    assert kinds == {"TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob"}
