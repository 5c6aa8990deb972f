"""`tfjob convert examples/paddle/job.yaml`, run with `tfjob run` beside the PaddleJob
(testkit/converted_runs.py): the TrainJob succeeds as the PaddleJob does, and its two
trainers print the same reports (ranks 0 and 1 of 2, the same weights and loss)."""

from __future__ import annotations

from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paddle" / "job.yaml"


def test_the_converted_paddlejob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    reports = pair.same_reports("PADDLE_REPORT")
    assert [r["rank"] for r in reports] == [0, 1]
    # Only the clean-pod policy is lost: the PADDLE_* env has a template form.
    assert [line.split(" lost ")[1].split(":")[0] for line in pair.losses] == [
        "spec.runPolicy.cleanPodPolicy"
    ]
