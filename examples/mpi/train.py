"""Data-parallel linear regression with MPI (mpi4py), one rank per slot.

The Launcher's `mpirun` starts the ranks (on a cluster in the Worker pods, through
kubexec.sh; under `tfjob run` on this machine). Every rank makes the same synthetic
data set (fixed seed), keeps its own shard of the rows, and at each step the
gradients of all ranks are summed with `Allreduce` and averaged over every row, so
every rank takes the step one process would take on all the data.

Without mpirun (plain `python3 train.py`) it is one rank on the whole data set: the
reference the distributed run must match.

Rank 0 prints one line `MPI_REPORT {json}` for each rank (gathered from all): its
rank, the number of ranks, its final weights and the loss on the whole data set.
"""

from __future__ import annotations

import json

import numpy as np
from mpi4py import MPI

SAMPLES, FEATURES, STEPS, RATE = 1200, 8, 60, 0.1


def data() -> tuple[np.ndarray, np.ndarray]:
    """The same synthetic regression problem in every rank (fixed seed)."""
    rng = np.random.default_rng(20)
    x = rng.normal(size=(SAMPLES, FEATURES))
    w = rng.normal(size=(FEATURES,))
    y = x @ w + 0.1 * rng.normal(size=(SAMPLES,))
    return x, y


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    x, y = data()
    shard = np.array_split(np.arange(SAMPLES), ranks)[rank]
    xs, ys = x[shard], y[shard]
    w = np.zeros(FEATURES)
    for _ in range(STEPS):
        local = 2 * xs.T @ (xs @ w - ys)  # the shard's summed gradient of the squared error
        total = np.empty_like(local)
        comm.Allreduce(local, total, op=MPI.SUM)
        w = w - RATE * total / SAMPLES
    report = {
        "rank": rank,
        "ranks": ranks,
        "weights": w.tolist(),
        "loss": float(np.mean((x @ w - y) ** 2)),
    }
    # Rank 0 prints every rank's report: mpirun forwards each rank's output in
    # chunks, so lines printed by several ranks at once could interleave.
    for each in comm.gather(report, root=0) or []:
        print("MPI_REPORT " + json.dumps(each), flush=True)


if __name__ == "__main__":
    main()
