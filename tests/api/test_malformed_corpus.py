"""The corpora of malformed jobs of every kind, refused by the local runtime's loader.

The same files go to a real API server in tests/kubernetes/operator/test_admission.py
(TFJobs, also to `tfjob run`), tests/kubernetes/test_pytorchjob_crd.py (PyTorchJobs)
and tests/kubernetes/test_kind_crds.py (JAXJobs, XGBoostJobs, PaddleJobs), which
check both give the same verdict; here the loader alone is checked quickly, without
a control plane.
"""

from __future__ import annotations

import pytest

from testkit.corpus import KIND_CORPORA, PYTORCH_CORPUS, Case, cases
from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs

CASES = cases()
PYTORCH_CASES = cases(PYTORCH_CORPUS)
KIND_CASES = {kind: cases(corpus) for kind, corpus in KIND_CORPORA.items()}
OTHER_CASES = [case for found in KIND_CASES.values() for case in found]


def test_the_corpus_covers_every_category_with_at_least_120_jobs() -> None:
    categories = {case.category for case in CASES}
    assert len(CASES) >= 120
    assert categories == {"template-types", "tfjob-rules", "run-policy", "old-layout"}
    assert all(case.what and case.field for case in CASES)


def test_the_pytorch_corpus_has_a_dozen_jobs_of_each_kind_of_mistake() -> None:
    assert len(PYTORCH_CASES) >= 12
    assert {case.category for case in PYTORCH_CASES} == {"pytorch-rules", "elastic"}
    assert all(case.what and case.field for case in PYTORCH_CASES)


@pytest.mark.parametrize(
    ("kind", "categories"),
    [
        ("JAXJob", {"jax-rules", "yaml"}),
        ("XGBoostJob", {"xgboost-rules", "yaml"}),
        ("PaddleJob", {"paddle-rules", "paddle-elastic", "yaml"}),
        ("MPIJob", {"mpi-rules", "yaml"}),
    ],
)
def test_each_other_kind_has_a_dozen_malformed_jobs(kind: str, categories: set[str]) -> None:
    found = KIND_CASES[kind]
    assert len(found) >= 12
    assert {case.category for case in found} == categories
    assert all(case.what and case.field for case in found)
    assert all(f"kind: {kind}" in case.path.read_text() for case in found)


ALL_CASES = CASES + PYTORCH_CASES + OTHER_CASES


@pytest.mark.parametrize(
    "case", ALL_CASES, ids=[c.path.parent.parent.name + "/" + c.id for c in ALL_CASES]
)
def test_each_malformed_job_is_refused_naming_its_field(case: Case) -> None:
    with pytest.raises(InvalidJob) as caught:
        load_jobs(case.path.read_text(), str(case.path), require_image=False)
    report = str(caught.value)
    assert case.field in report, report
    assert all(error.fix for error in caught.value.errors), report
