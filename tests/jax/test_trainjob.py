"""A TrainJob on Trainer's jax-distributed runtime (examples/trainjob/jax.yaml), run
with `tfjob run`: 3 nodes train examples/jax/train.py together over jax.distributed
and match one process, as the JAXJob example does (test_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.examples import run_job, single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOLERANCE = 1e-5  # relative; the all-gathered sum adds in another order
JAX_ENV = ("NUM_PROCESSES", "PROCESS_ID", "COORDINATOR_ADDRESS", "COORDINATOR_PORT")


def test_a_jax_trainjob_of_three_nodes_trains_as_one_process(tmp_path: Path) -> None:
    reference = single_process(EXAMPLES / "jax" / "train.py", tmp_path, "JAX_REPORT", JAX_ENV)
    pods = [f"jax-regression-node-0-{i}" for i in range(3)]
    found = run_job(EXAMPLES / "trainjob" / "jax.yaml", tmp_path, pods, "JAX_REPORT")
    # JAX_PROCESS_ID is each pod's completion index; process 0 hosted the coordinator.
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["processes"] for p in pods} == {3}
    first = found[pods[0]]
    assert all(found[p]["weights"] == first["weights"] for p in pods)
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)
