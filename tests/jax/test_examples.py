"""The JAX example (examples/jax), run end to end with `tfjob run` as a user would.

Each process prints one `JAX_REPORT {json}` line. The test checks that the processes
are the ones the job describes, that they trained together (the all-gathered
gradient keeps every process's weights equal; three processes fitting their own
shards would end apart), and that the result is the single-process run's on the same
data: each step's gradient is the sum over every shard, as over all rows at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.examples import run_job, single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jax"
TOLERANCE = 1e-5  # relative; the all-gathered sum adds in another order
JAX_ENV = ("NUM_PROCESSES", "PROCESS_ID", "COORDINATOR_ADDRESS", "COORDINATOR_PORT")


def test_three_workers_train_as_one_process(tmp_path: Path) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "JAX_REPORT", JAX_ENV)
    assert reference["processes"] == 1
    pods = [f"jax-regression-worker-{i}" for i in range(3)]
    found = run_job(EXAMPLES / "job.yaml", tmp_path, pods, "JAX_REPORT")
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["processes"] for p in pods} == {3}
    first = found[pods[0]]
    for pod in pods:
        assert found[pod]["weights"] == first["weights"]
    assert first["loss"] < 0.05  # it learned: the noise's variance is 0.01
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)
