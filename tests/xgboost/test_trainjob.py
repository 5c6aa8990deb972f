"""A TrainJob on Trainer's xgboost-distributed runtime (examples/trainjob/xgboost.yaml),
run with `tfjob run`: 3 nodes build each tree together through node 0's tracker and
match one process, as the XGBoostJob example does (test_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.examples import run_job, single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOLERANCE = 1e-5  # relative; histogram sums add in another order
XGBOOST_ENV = ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "WORKER_ADDRS", "WORKER_PORT")


def test_an_xgboost_trainjob_of_three_nodes_trains_as_one_process(tmp_path: Path) -> None:
    script = EXAMPLES / "xgboost" / "train.py"
    reference = single_process(script, tmp_path, "XGBOOST_REPORT", XGBOOST_ENV)
    pods = [f"xgboost-regression-node-0-{i}" for i in range(3)]
    found = run_job(EXAMPLES / "trainjob" / "xgboost.yaml", tmp_path, pods, "XGBOOST_REPORT")
    # DMLC_TASK_ID is each pod's completion index; node 0 ran the tracker.
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["world"] for p in pods} == {3}
    first = found[pods[0]]
    assert all(found[p]["predictions"] == first["predictions"] for p in pods)
    assert first["rmse"] == pytest.approx(reference["rmse"], rel=TOLERANCE)
    assert first["predictions"] == pytest.approx(reference["predictions"], rel=TOLERANCE)
