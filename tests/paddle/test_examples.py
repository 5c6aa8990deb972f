"""The PaddlePaddle example (examples/paddle), run end to end with `tfjob run`, beside
its `tfjob convert` TrainJob (testkit/converted_runs.py): the example runs once, and
both tests read that run.

Each trainer prints one `PADDLE_REPORT {json}` line. The first test checks that two
trainers ran, one per Worker, with the ranks Paddle's launchers agreed on at
PADDLE_MASTER; that they trained together (DataParallel's all-reduced gradient keeps
their weights equal; two trainers fitting their own halves would end apart); that
the result is the single-process run's on the same data (the mean of two equal
halves' gradients is the gradient over all rows); and that the launchers left no
log folder behind, in the example's folder (the pair's copy of it, where both jobs
ran) or in their TMPDIR. The second, that the TrainJob succeeds as the PaddleJob does
and its two trainers print the same reports (ranks 0 and 1 of 2, the same weights and
loss), with only the clean-pod policy named lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.converted_runs import Pair, run_both
from testkit.examples import single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "paddle"
TOLERANCE = 1e-5  # relative; the all-reduce adds in another order
PADDLE_ENV = (
    "PADDLE_MASTER",
    "PADDLE_NNODES",
    "PADDLE_JOB_ID",
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/paddle/job.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "job.yaml", tmp_path_factory.mktemp("pair"))


def test_two_workers_train_as_one_process_and_leave_no_logs(tmp_path: Path, pair: Pair) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "PADDLE_REPORT", PADDLE_ENV)
    assert reference["trainers"] == 1
    pods = [f"paddle-regression-worker-{i}" for i in range(2)]
    found = pair.original.pod_reports(pods, "PADDLE_REPORT")
    assert sorted(found[p]["rank"] for p in pods) == [0, 1]
    assert {found[p]["trainers"] for p in pods} == {2}
    first = found[pods[0]]
    for pod in pods:
        assert found[pod]["weights"] == first["weights"]
    assert first["loss"] < 0.05  # it learned: the noise's variance is 0.01
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)
    # No ./log in the folder the jobs ran in: the example's files and the conversion.
    assert sorted(p.name for p in pair.folder.iterdir()) == sorted(
        [*(p.name for p in EXAMPLES.iterdir()), "converted-job.yaml"]
    )
    # Nor a temporary one, where their launchers' logs go.
    for run in (pair.original, pair.converted):
        assert [p.name for p in run.tmp_dir.iterdir() if p.is_dir()] == []


def test_the_converted_paddlejob_trains_as_the_original(pair: Pair) -> None:
    reports = pair.same_reports("PADDLE_REPORT")
    assert [r["rank"] for r in reports] == [0, 1]
    # Only the clean-pod policy is lost: the PADDLE_* env has a template form.
    assert [line.split(" lost ")[1].split(":")[0] for line in pair.losses] == [
        "spec.runPolicy.cleanPodPolicy"
    ]
