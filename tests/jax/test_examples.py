"""The JAX example (examples/jax), run end to end with `tfjob run` as a user would,
beside its `tfjob convert` TrainJob (testkit/converted_runs.py): the example runs
once, and both tests read that run.

Each process prints one `JAX_REPORT {json}` line. The first test checks that the
processes are the ones the job describes, that they trained together (the
all-gathered gradient keeps every process's weights equal; three processes fitting
their own shards would end apart), and that the result is the single-process run's on
the same data: each step's gradient is the sum over every shard, as over all rows at
once. The second, that the TrainJob succeeds as the JAXJob does and its three
processes print the same reports (ranks, process count, weights, loss).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.converted_runs import Pair, run_both
from testkit.examples import single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jax"
TOLERANCE = 1e-5  # relative; the all-gathered sum adds in another order
JAX_ENV = ("NUM_PROCESSES", "PROCESS_ID", "COORDINATOR_ADDRESS", "COORDINATOR_PORT")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/jax/job.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "job.yaml", tmp_path_factory.mktemp("pair"))


def test_three_workers_train_as_one_process(tmp_path: Path, pair: Pair) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "JAX_REPORT", JAX_ENV)
    assert reference["processes"] == 1
    pods = [f"jax-regression-worker-{i}" for i in range(3)]
    found = pair.original.pod_reports(pods, "JAX_REPORT")
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["processes"] for p in pods} == {3}
    first = found[pods[0]]
    for pod in pods:
        assert found[pod]["weights"] == first["weights"]
    assert first["loss"] < 0.05  # it learned: the noise's variance is 0.01
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)


def test_the_converted_jaxjob_trains_as_the_original(pair: Pair) -> None:
    reports = pair.same_reports("JAX_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2]
