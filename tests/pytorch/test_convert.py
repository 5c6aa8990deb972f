"""`tfjob convert examples/pytorch/ddp.yaml`, run with `tfjob run` beside the
PyTorchJob (testkit/converted_runs.py): the TrainJob succeeds as the PyTorchJob does,
and its Master and Workers print the same reports (ranks, world size, every step's
loss)."""

from __future__ import annotations

from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "ddp.yaml"


def test_the_converted_pytorchjob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    reports = pair.same_reports("PYTORCH_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2]
