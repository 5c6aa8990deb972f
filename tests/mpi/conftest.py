"""Gate for the MPI suite: it needs Open MPI's `mpirun` on PATH and a `python3` that
imports mpi4py (testkit/python_gate.py)."""

from __future__ import annotations

import shutil

import pytest

from testkit.python_gate import require, unusable


@pytest.fixture(scope="session")
def mpi_check() -> str | None:
    """None if `mpirun` is on PATH and `python3` imports mpi4py, else why not."""
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH; apt-get install openmpi-bin"
    return unusable("from mpi4py import MPI; import numpy", "mpi")


@pytest.fixture(autouse=True, scope="module")
def _require_mpi(mpi_check: str | None) -> None:
    require(mpi_check)
