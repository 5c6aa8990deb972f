"""The MPI example (examples/mpi), run end to end with `tfjob run` as a user would,
with Open MPI's real mpirun on this machine, beside its `tfjob convert` TrainJob
(testkit/converted_runs.py): the example runs once, and both tests read that run.

Rank 0 prints an `MPI_REPORT {json}` line for every rank (gathered), which mpirun
forwards to the Launcher's log. The first test checks that the ranks are the ones the
job describes (2 Workers x 2 slots), that they trained together (the Allreduce keeps
every rank's weights equal; four ranks fitting their own shards would end apart), and
that the result is the single-process run's: each step's gradient is the sum over
every shard, as over all rows at once. The second, that the TrainJob (an MPI
runtime's: its launcher's mpirun gets the hostfile of the Workers' slots, as the v1
launcher does) succeeds as the MPIJob does, and its launcher's mpirun starts the same
4 ranks, which print the same reports (ranks, weights, loss).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testkit import fast_yaml
from testkit.converted_runs import Pair, run_both
from testkit.examples import TFJOB, reports, run, single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mpi"
TOLERANCE = 1e-9  # relative; float64, the Allreduce adds the shards in another order


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/mpi/job.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "job.yaml", tmp_path_factory.mktemp("pair"))


def test_four_ranks_train_as_one_process(tmp_path: Path, pair: Pair) -> None:
    reference = single_process(EXAMPLES / "train.py", tmp_path, "MPI_REPORT", ())
    assert reference["ranks"] == 1
    pair.original.succeeded()
    assert "MPIJob mpi-regression is successfully completed." in pair.original.output
    run_dir = pair.original.run_dir
    found = reports((run_dir / "mpi-regression-launcher.log").read_text(), "MPI_REPORT")
    assert sorted(r["rank"] for r in found) == [0, 1, 2, 3]
    assert {r["ranks"] for r in found} == {4}
    first = found[0]
    for report in found:
        assert report["weights"] == first["weights"]
    assert first["loss"] < 0.05  # it learned: the noise's variance is 0.01
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-12)
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert [c["type"] for c in final["status"]["conditions"]][-1] == "Succeeded"


def test_the_converted_mpijob_trains_as_the_original(pair: Pair) -> None:
    same = pair.same_reports("MPI_REPORT")
    assert [r["rank"] for r in same] == [0, 1, 2, 3]
    assert {r["ranks"] for r in same} == {4}
    # The ranks ran under the converted launcher, the TrainJob's trainer step.
    logs = sorted(p.name for p in pair.converted.run_dir.glob("*.log"))
    assert logs == [
        "mpi-regression-launcher-0-0.log",
        "mpi-regression-node-0-0.log",
        "mpi-regression-node-0-1.log",
    ]
    launcher = (pair.converted.run_dir / "mpi-regression-launcher-0-0.log").read_text()
    assert launcher.count("MPI_REPORT ") == 4
    final = yaml.safe_load((pair.converted.run_dir / "trainjob.yaml").read_text())
    assert [c["type"] for c in final["status"]["conditions"] if c["status"] == "True"] == [
        "Complete"
    ]
    assert any("env[OMPI_MCA_plm_rsh_agent]" in line for line in pair.losses)


def test_more_ranks_than_the_workers_slots_fail_the_job(tmp_path: Path) -> None:
    """The local hostfile has the cluster's slots (Workers x slotsPerWorker), no more:
    a fifth rank does not fit, mpirun fails, and the Launcher's failure is the job's."""
    job = fast_yaml.load((EXAMPLES / "job.yaml").read_text())
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["command"] = ["mpirun", "-n", "5", "true"]
    del launcher["workingDir"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    run_dir = tmp_path / "run"
    done = run([*TFJOB, "run", str(path), "--run-dir", str(run_dir), "--no-view"], tmp_path)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 Launcher replica(s) failed" in done.stderr
    log = (run_dir / "mpi-regression-launcher.log").read_text()
    assert "There are not enough slots available in the system to satisfy the 5" in log
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert [c["type"] for c in final["status"]["conditions"]][-1] == "Failed"
