"""A TrainJob on Trainer's mlx-distributed runtime (an MPI runtime: a launcher that is
also node 0, nodes reached over ssh on a cluster), run with `tfjob run`: the launcher's
`mpirun` gets the local hostfile of the runtime's slots (4 nodes x 1 process) and
starts 4 ranks of examples/mpi/train.py here, which train as one process, as the
MPIJob example does (test_examples.py). MLX itself is not installed here: mpi4py
stands in for it; the runtime's part (hostfile, launcher, nodes, verdict) is the
same whatever the ranks import."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testkit.examples import TFJOB, reports, run, single_process

from .test_examples import TOLERANCE

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "mpi" / "train.py"


def test_an_mlx_trainjob_of_four_nodes_trains_with_mpirun_as_one_process(
    tmp_path: Path,
) -> None:
    reference = single_process(TRAIN, tmp_path, "MPI_REPORT", ())
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "mlx"},
        "spec": {
            "runtimeRef": {"name": "mlx-distributed"},
            "trainer": {"numNodes": 4, "command": ["mpirun", "python3", str(TRAIN)]},
        },
    }
    path = tmp_path / "trainjob.yaml"
    path.write_text(yaml.safe_dump(trainjob))
    run_dir = tmp_path / "run"
    done = run([*TFJOB, "run", str(path), "--run-dir", str(run_dir), "--no-view"], tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    found = reports((run_dir / "mlx-launcher-0-0.log").read_text(), "MPI_REPORT")
    assert sorted(r["rank"] for r in found) == [0, 1, 2, 3]  # every slot, no more
    assert {r["ranks"] for r in found} == {4}
    first = found[0]
    assert all(r["weights"] == first["weights"] for r in found)
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-12)
    final = yaml.safe_load((run_dir / "trainjob.yaml").read_text())
    assert [c["type"] for c in final["status"]["conditions"] if c["status"] == "True"] == [
        "Complete"
    ]
