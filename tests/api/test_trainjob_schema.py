"""Kubeflow Trainer's TrainJob and runtimes, checked locally as the API server checks them.

The package ships the schemas of the CRDs tools/crd/trainer.py generates (Trainer's own
plus tfjob's rules, tools/crd/trainer-validation.yaml), so `tfjob.api.schema_rules`
refuses what a cluster refuses. The corpus tests/fixtures/malformed-trainjob/ holds one
object per rule, each file starting with two comment lines: what is wrong, and
`# message: <fragment>`, words both the API server's refusal and the local report must
contain. A file of several documents is a sequence: every document before the last is
valid (applied first), the last is refused. Categories: `trainjob` and `runtime` are
refused as they are, on create; `update` only as a change of the document before it
(rules on `oldSelf`, which the local check, seeing one document, cannot apply: each
document is valid on its own). The same files go to a real API server in
tests/kubernetes/test_trainjob_crds.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit import fast_yaml
from tfjob.api import schema_rules

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "malformed-trainjob"
VALID = CORPUS / "valid.yaml"
RUNTIMES = REPO / "manifests" / "overlays" / "trainer-runtimes"
VALIDATION = REPO / "tools" / "crd" / "trainer-validation.yaml"
SCHEMAS = {
    "TrainJob": schema_rules.TRAINJOB_SCHEMA,
    "TrainingRuntime": schema_rules.TRAININGRUNTIME_SCHEMA,
    "ClusterTrainingRuntime": schema_rules.CLUSTERTRAININGRUNTIME_SCHEMA,
}
CRD_FILES = {
    "TrainJob": "trainjob-crd.yaml",
    "TrainingRuntime": "trainingruntime-crd.yaml",
    "ClusterTrainingRuntime": "clustertrainingruntime-crd.yaml",
}


@dataclass(frozen=True)
class Case:
    """One corpus file: its documents in order, the last one the refused one."""

    path: Path
    category: str
    what: str
    message: str
    documents: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return f"{self.category}/{self.path.stem}"


def trainjob_cases() -> list[Case]:
    found = []
    for path in sorted(CORPUS.glob("*/*.yaml")):
        text = path.read_text()
        lines = text.splitlines()
        assert lines[1].startswith("# message: "), path
        documents = [doc for doc in fast_yaml.load_all(text) if doc]
        what, message = lines[0].removeprefix("# "), lines[1].removeprefix("# message: ")
        found.append(Case(path, path.parent.name, what, message, documents))
    return found


def valid_documents() -> list[dict[str, Any]]:
    """The corpus's valid objects, at the edge of its rules, and the runtimes Trainer
    ships (manifests/overlays/trainer-runtimes)."""
    documents = [doc for doc in fast_yaml.load_all(VALID.read_text()) if doc]
    for path in sorted(RUNTIMES.glob("*-distributed.yaml")):
        documents += [doc for doc in fast_yaml.load_all(path.read_text()) if doc]
    return documents


def local_report(document: dict[str, Any]) -> str:
    """The local check's errors, one per line ("" when the object is valid)."""
    errors = schema_rules.check(document, SCHEMAS[document["kind"]])
    return "\n".join(map(str, errors))


CASES = trainjob_cases()


def test_the_corpus_has_every_category_and_a_case_per_tfjob_rule() -> None:
    """Every rule tools/crd/trainer-validation.yaml adds is exercised by a case whose
    expected message is that rule's (so a rule nobody tests fails here)."""
    assert {case.category for case in CASES} == {"trainjob", "update", "runtime"}
    assert len(CASES) >= 25
    assert all(case.what and case.message for case in CASES)
    additions = fast_yaml.load(VALIDATION.read_text())
    messages = {
        rule["message"]
        for crd in additions.values()
        for addition in crd
        for rule in addition.get("rules", [])
    }
    for message in messages:
        assert any(message.startswith(case.message) for case in CASES), message


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_the_package_ships_the_crds_schema(kind: str) -> None:
    crd = fast_yaml.load((REPO / "manifests" / "base" / CRD_FILES[kind]).read_text())
    [version] = crd["spec"]["versions"]
    shipped = schema_rules.schema_document(SCHEMAS[kind])
    assert shipped == version["schema"]["openAPIV3Schema"]
    assert shipped["properties"]["spec"]["properties"]


@pytest.mark.parametrize(
    "document", valid_documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_every_valid_object_is_accepted(document: dict[str, Any]) -> None:
    assert local_report(document) == ""


REFUSED = [case for case in CASES if case.category != "update"]


@pytest.mark.parametrize("case", REFUSED, ids=[case.id for case in REFUSED])
def test_each_malformed_object_is_refused_with_its_message(case: Case) -> None:
    *before, refused = case.documents
    assert [local_report(doc) for doc in before] == [""] * len(before)
    report = local_report(refused)
    assert case.message in report, report


UPDATES = [case for case in CASES if case.category == "update"]


@pytest.mark.parametrize("case", UPDATES, ids=[case.id for case in UPDATES])
def test_an_update_case_is_wrong_only_as_a_change(case: Case) -> None:
    """Each document is a valid TrainJob: only the change from one to the next is
    refused (by the API server: test_trainjob_crds.py)."""
    assert len(case.documents) >= 2
    assert [local_report(doc) for doc in case.documents] == [""] * len(case.documents)
    assert case.documents[-1] != case.documents[-2]


def test_a_tfjob_rule_reports_the_fix_apart_from_the_problem() -> None:
    """The messages are written `<what is wrong>: <the fix>`, which the local report
    shows as the problem and its fix."""
    [case] = [c for c in CASES if c.path.name == "01-zero-nodes.yaml"]
    [error] = schema_rules.check(case.documents[-1], schema_rules.TRAINJOB_SCHEMA)
    assert error.path == "spec.trainer.numNodes"
    assert error.message.startswith("spec.trainer.numNodes must be at least 1")
    assert error.fix.startswith("set 1 or more")


@pytest.mark.parametrize(
    ("name", "nodes", "accepted"),
    [
        ("x" * 48, 10, True),
        ("x" * 48, 11, False),
        ("x" * 47, 100, True),
        ("x" * 47, 101, False),
        ("x" * 48, None, True),
        ("x" * 49, None, False),
    ],
)
def test_the_name_limit_follows_the_longest_pod_name(
    name: str, nodes: int | None, accepted: bool
) -> None:
    """JobSet refuses a pod name over 63 characters: <name>-node-0-<numNodes - 1> and a
    5-character suffix."""
    trainer: dict[str, Any] = {} if nodes is None else {"numNodes": nodes}
    document = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }
    longest_pod = f"{name}-node-0-{(nodes or 1) - 1}-abcde"
    assert (len(longest_pod) <= 63) == accepted
    assert (local_report(document) == "") == accepted
