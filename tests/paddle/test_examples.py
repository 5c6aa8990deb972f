"""The PaddlePaddle example (examples/paddle), run end to end with `tfjob run`.

Each trainer prints one `PADDLE_REPORT {json}` line. The test checks that two
trainers ran, one per Worker, with the ranks Paddle's launchers agreed on at
PADDLE_MASTER; that they trained together (DataParallel's all-reduced gradient keeps
their weights equal; two trainers fitting their own halves would end apart); that
the result is the single-process run's on the same data (the mean of two equal
halves' gradients is the gradient over all rows); and that the launchers left no
log folder behind, in the example's folder or elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.examples import run_job, single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "paddle"
TOLERANCE = 1e-5  # relative; the all-reduce adds in another order
PADDLE_ENV = (
    "PADDLE_MASTER",
    "PADDLE_NNODES",
    "PADDLE_JOB_ID",
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
)


def test_two_workers_train_as_one_process_and_leave_no_logs(tmp_path: Path) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "PADDLE_REPORT", PADDLE_ENV)
    assert reference["trainers"] == 1
    before = sorted(p.name for p in EXAMPLES.iterdir())
    scratch = tmp_path / "tmp"  # the replicas' TMPDIR: where their launchers' logs go
    scratch.mkdir()
    pods = [f"paddle-regression-worker-{i}" for i in range(2)]
    found = run_job(
        EXAMPLES / "job.yaml",
        tmp_path,
        pods,
        "PADDLE_REPORT",
        {**os.environ, "TMPDIR": str(scratch)},
    )
    assert sorted(found[p]["rank"] for p in pods) == [0, 1]
    assert {found[p]["trainers"] for p in pods} == {2}
    first = found[pods[0]]
    for pod in pods:
        assert found[pod]["weights"] == first["weights"]
    assert first["loss"] < 0.05  # it learned: the noise's variance is 0.01
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)
    assert sorted(p.name for p in EXAMPLES.iterdir()) == before  # no ./log
    assert [p.name for p in scratch.iterdir() if p.is_dir()] == []  # nor a temporary one
