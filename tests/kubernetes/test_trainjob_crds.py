"""Kubeflow Trainer's TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs (as
manifests/base installs them, with tfjob's rules) on a real API server.

They become Established; every valid object of the corpus (tests/fixtures/malformed-
trainjob/valid.yaml) and every runtime Trainer ships is accepted; every malformed one
is refused with its message, which tests/api/test_trainjob_schema.py checks the local
check gives too. Objects go to the API server as JSON, with strict field validation:
single objects as a dry run, sequences (an update case) for real, the last document
replacing the one before it.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from testkit.controlplane import MANIFESTS_BASE, ControlPlane, apply_documents, load_manifest
from tests.api.test_trainjob_schema import RUNTIMES, Case, trainjob_cases, valid_documents

GROUP = "trainer.kubeflow.org"
PLURALS = {
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
}
CASES = trainjob_cases()


def _established(kube: Client, name: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = kube.get(CustomResourceDefinition, name)
        conditions = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def trainer_crds(kube: Client) -> list[str]:
    """The three CRDs from manifests/base, applied; their names."""
    names = []
    for stem in ("trainjob", "trainingruntime", "clustertrainingruntime"):
        [crd] = load_manifest(MANIFESTS_BASE / f"{stem}-crd.yaml")
        apply_documents(kube, [crd])
        names.append(crd["metadata"]["name"])
    return names


def _path(document: dict[str, Any], namespace: str, *, named: bool = False) -> str:
    kind = document["kind"]
    where = "" if kind == "ClusterTrainingRuntime" else f"/namespaces/{namespace}"
    name = f"/{document['metadata']['name']}" if named else ""
    return f"/apis/{GROUP}/v1alpha1{where}/{PLURALS[kind]}{name}"


def create(
    plane: ControlPlane, namespace: str, document: dict[str, Any], *, dry_run: bool = True
) -> tuple[int, str]:
    """POST the object (strict field validation): the status and the refusal's message."""
    query = "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
    status, answer = plane.request("POST", _path(document, namespace) + query, body=document)
    return status, _message(answer)


def replace(plane: ControlPlane, namespace: str, document: dict[str, Any]) -> tuple[int, str]:
    """PUT the object over the stored one of its name (its resourceVersion taken)."""
    path = _path(document, namespace, named=True)
    status, stored = plane.request("GET", path)
    assert status == 200, stored
    body = {**document, "metadata": {**document["metadata"], **_version(stored)}}
    status, answer = plane.request("PUT", path + "?fieldValidation=Strict", body=body)
    return status, _message(answer)


def _version(stored: dict[str, Any]) -> dict[str, str]:
    return {"resourceVersion": stored["metadata"]["resourceVersion"]}


def _message(answer: Any) -> str:
    return str(answer.get("message", "")) if isinstance(answer, dict) else str(answer)


def _delete(plane: ControlPlane, namespace: str, document: dict[str, Any]) -> None:
    plane.request("DELETE", _path(document, namespace, named=True))


def test_the_crds_are_established_with_trainers_names(
    kube: Client, trainer_crds: list[str]
) -> None:
    scopes = {}
    for name in trainer_crds:
        assert _established(kube, name), name
        crd = kube.get(CustomResourceDefinition, name)
        assert crd.spec.group == GROUP
        assert [v.name for v in crd.spec.versions] == ["v1alpha1"]
        assert name == f"{PLURALS[crd.spec.names.kind]}.{GROUP}"
        scopes[crd.spec.names.kind] = crd.spec.scope
    assert scopes == {
        "TrainJob": "Namespaced",
        "TrainingRuntime": "Namespaced",
        "ClusterTrainingRuntime": "Cluster",
    }


def test_every_valid_object_is_accepted(
    control_plane: ControlPlane, kube: Client, trainer_crds: list[str], namespace: str
) -> None:
    assert all(_established(kube, name) for name in trainer_crds)
    problems = []
    for document in valid_documents():
        if document["kind"] == "ClusterTrainingRuntime":
            # Cluster-wide: another file on this control plane may have installed the
            # shipped runtimes of these names; the schema is checked the same under this.
            name = f"{document['metadata']['name']}-{namespace}"
            document = {**document, "metadata": {**document["metadata"], "name": name}}
        status, message = create(control_plane, namespace, document)
        if status != 201:
            problems.append(f"{document['kind']}/{document['metadata']['name']}: {message}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_each_malformed_object_is_refused_with_its_message(
    control_plane: ControlPlane,
    kube: Client,
    trainer_crds: list[str],
    namespace: str,
    case: Case,
) -> None:
    assert all(_established(kube, name) for name in trainer_crds)
    *before, last = case.documents
    if not before:
        status, message = create(control_plane, namespace, last)
    else:
        for document in before:
            created, why = create(control_plane, namespace, document, dry_run=False)
            assert created == 201, why
        try:
            status, message = replace(control_plane, namespace, last)
        finally:
            _delete(control_plane, namespace, last)
    assert status in (400, 422), (status, message)  # 400: an unknown field
    assert case.message in message, message


def _suspendable(name: str, suspend: bool, team: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 2},
        "suspend": suspend,
    }
    if team is not None:
        patch = {"template": {"metadata": {"labels": {"team": team}}}}
        spec["runtimePatches"] = [{"manager": "example.com/team", "trainingRuntimeSpec": patch}]
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ((True, "a"), (True, "b")),  # changed while suspended
        ((False, "a"), (True, "b")),  # suspended by the same update (as Kueue does)
        ((True, "a"), (False, "b")),  # changed as it resumes
        ((True, None), (True, "a")),  # added while suspended
        ((False, "a"), (True, "a")),  # no change to the patches at all
    ],
)
def test_runtime_patches_change_while_suspended_before_or_after(
    control_plane: ControlPlane,
    kube: Client,
    trainer_crds: list[str],
    namespace: str,
    first: tuple[bool, str | None],
    then: tuple[bool, str | None],
) -> None:
    """The other side of the update cases: what Trainer's webhook lets through."""
    assert all(_established(kube, name) for name in trainer_crds)
    status, message = create(control_plane, namespace, _suspendable("moved", *first), dry_run=False)
    assert status == 201, message
    status, message = replace(control_plane, namespace, _suspendable("moved", *then))
    assert status == 200, message


def test_the_runtimes_overlay_installs_the_runtimes_trainer_ships(
    control_plane: ControlPlane, kube: Client, trainer_crds: list[str]
) -> None:
    assert all(_established(kube, name) for name in trainer_crds)
    kubectl = [str(control_plane.assets.tool("kubectl"))]
    kubectl += ["--kubeconfig", str(control_plane.kubeconfig_path)]
    done = subprocess.run(
        [*kubectl, "apply", "--server-side", "-k", str(RUNTIMES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    status, listed = control_plane.request("GET", f"/apis/{GROUP}/v1alpha1/clustertrainingruntimes")
    assert status == 200, listed
    names = {item["metadata"]["name"] for item in listed["items"]}
    shipped = {
        "torch-distributed",
        "deepspeed-distributed",
        "mlx-distributed",
        "jax-distributed",
        "xgboost-distributed",
    }
    assert shipped <= names
    frameworks = {
        item["metadata"]["name"]: item["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        for item in listed["items"]
        if item["metadata"]["name"] in shipped
    }
    assert frameworks["torch-distributed"] == "torch"
    assert frameworks["deepspeed-distributed"] == "deepspeed"
