"""The corpora of malformed TFJobs and PyTorchJobs, refused by the local runtime's loader.

The same files go to a real API server in tests/kubernetes/operator/test_admission.py
(TFJobs, also to `tfjob run`) and tests/kubernetes/test_pytorchjob_crd.py
(PyTorchJobs), which check both give the same verdict; here the loader alone is
checked quickly, without a control plane.
"""

from __future__ import annotations

import pytest

from testkit.corpus import PYTORCH_CORPUS, Case, cases
from tfjob.api.errors import InvalidJob
from tfjob.frameworks.load import load_jobs

CASES = cases()
PYTORCH_CASES = cases(PYTORCH_CORPUS)


def test_the_corpus_covers_every_category_with_at_least_120_jobs() -> None:
    categories = {case.category for case in CASES}
    assert len(CASES) >= 120
    assert categories == {"template-types", "tfjob-rules", "run-policy", "old-layout"}
    assert all(case.what and case.field for case in CASES)


def test_the_pytorch_corpus_has_a_dozen_jobs_of_each_kind_of_mistake() -> None:
    assert len(PYTORCH_CASES) >= 12
    assert {case.category for case in PYTORCH_CASES} == {"pytorch-rules", "elastic"}
    assert all(case.what and case.field for case in PYTORCH_CASES)


@pytest.mark.parametrize("case", CASES + PYTORCH_CASES, ids=[c.id for c in CASES + PYTORCH_CASES])
def test_each_malformed_job_is_refused_naming_its_field(case: Case) -> None:
    with pytest.raises(InvalidJob) as caught:
        load_jobs(case.path.read_text(), str(case.path), require_image=False)
    report = str(caught.value)
    assert case.field in report, report
    assert all(error.fix for error in caught.value.errors), report
