"""`tfjob convert examples/xgboost/job.yaml`, run with `tfjob run` beside the
XGBoostJob (testkit/converted_runs.py): the TrainJob succeeds as the XGBoostJob does,
and its Master and Workers print the same reports (ranks, trees, rmse, predictions)."""

from __future__ import annotations

from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "xgboost" / "job.yaml"


def test_the_converted_xgboostjob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    reports = pair.same_reports("XGBOOST_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2]
