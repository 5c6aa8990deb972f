"""`tfjob convert examples/jax/job.yaml`, run with `tfjob run` beside the JAXJob
(testkit/converted_runs.py): the TrainJob succeeds as the JAXJob does, and its three
processes print the same reports (ranks, process count, weights, loss)."""

from __future__ import annotations

from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jax" / "job.yaml"


def test_the_converted_jaxjob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    reports = pair.same_reports("JAX_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2]
