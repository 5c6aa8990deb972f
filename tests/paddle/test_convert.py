"""`tfjob convert examples/paddle/job.yaml`, run with `tfjob run` beside the PaddleJob
(testkit/converted_runs.py): the TrainJob succeeds as the PaddleJob does, and its two
trainers print the same reports (ranks 0 and 1 of 2, the same weights and loss)."""

from __future__ import annotations

from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paddle" / "job.yaml"


def test_the_converted_paddlejob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    assert pair.original.returncode == 0, pair.original.output[-3000:]
    assert pair.converted.returncode == 0, pair.converted.output[-3000:]
    reports = pair.original.reports("PADDLE_REPORT")
    assert [r["rank"] for r in reports] == [0, 1]
    assert pair.converted.reports("PADDLE_REPORT") == reports
    # Only the clean-pod policy is lost: the PADDLE_* env has a template form.
    assert [line.split(" lost ")[1].split(":")[0] for line in pair.losses] == [
        "spec.runPolicy.cleanPodPolicy"
    ]
