"""The XGBoost example (examples/xgboost), run end to end with `tfjob run`, beside its
`tfjob convert` TrainJob (testkit/converted_runs.py): the example runs once, and both
tests read that run.

Each process prints one `XGBOOST_REPORT {json}` line. The first test checks the ranks
the job describes, that every process ends with the same model (they built each tree
together over XGBoost's collective, through the Master's tracker; three processes
on their own rows would not), and that the model is the single-process run's on the
same rows: the histograms of all shards are summed, as one process would count them.
The second, that the TrainJob succeeds as the XGBoostJob does and its Master and
Workers print the same reports (ranks, trees, rmse, predictions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.converted_runs import Pair, run_both
from testkit.examples import single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "xgboost"
TOLERANCE = 1e-5  # relative; histogram sums add in another order
XGBOOST_ENV = ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "WORKER_ADDRS", "WORKER_PORT")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/xgboost/job.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "job.yaml", tmp_path_factory.mktemp("pair"))


def test_a_master_and_two_workers_train_as_one_process(tmp_path: Path, pair: Pair) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "XGBOOST_REPORT", XGBOOST_ENV)
    assert reference["world"] == 1
    pods = ["xgboost-regression-master-0", *(f"xgboost-regression-worker-{i}" for i in range(2))]
    found = pair.original.pod_reports(pods, "XGBOOST_REPORT")
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["world"] for p in pods} == {3}
    first = found[pods[0]]
    for pod in pods:
        assert found[pod]["predictions"] == first["predictions"]
        assert found[pod]["trees"] == 20
    assert first["rmse"] < 0.5  # it learned: the target's spread is about 1
    assert first["rmse"] == pytest.approx(reference["rmse"], rel=TOLERANCE)
    assert first["predictions"] == pytest.approx(reference["predictions"], rel=TOLERANCE)


def test_the_converted_xgboostjob_trains_as_the_original(pair: Pair) -> None:
    reports = pair.same_reports("XGBOOST_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2]
