"""`tfjob convert examples/mpi/job.yaml`, run with `tfjob run` beside the MPIJob
(testkit/converted_runs.py): the TrainJob (an MPI runtime's: its launcher's mpirun
gets the hostfile of the Workers' slots, as the v1 launcher does) succeeds as the
MPIJob does, and its launcher's mpirun starts the same 4 ranks, which print the same
reports (ranks, weights, loss)."""

from __future__ import annotations

from pathlib import Path

import yaml

from testkit.converted_runs import run_both

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mpi" / "job.yaml"


def test_the_converted_mpijob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLE, tmp_path)
    reports = pair.same_reports("MPI_REPORT")
    assert [r["rank"] for r in reports] == [0, 1, 2, 3]
    assert {r["ranks"] for r in reports} == {4}
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
