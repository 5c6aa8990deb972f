"""A TrainJob on tfjob's paddle-distributed runtime (examples/trainjob/paddle.yaml),
run with `tfjob run`: 2 nodes meet at PADDLE_MASTER, agree on ranks 0 and 1, and
train examples/paddle/train.py as one DataParallel model that matches one process,
as the PaddleJob example does (test_examples.py).

It hung before ("master not ready"): the runtime's POD_IP is each node's host name
completed by `$(TFJOB_POD_INDEX)`, and the local runtime mapped host names to
127.0.0.1 before that reference was expanded, so Paddle's launcher took an address
that does not resolve here for its own and for the rendezvous'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.examples import run_job, single_process

from .test_examples import PADDLE_ENV, TOLERANCE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PODS = [f"paddle-regression-node-0-{i}" for i in range(2)]


def test_a_paddle_trainjob_of_two_nodes_trains_as_one_process(tmp_path: Path) -> None:
    reference = single_process(
        EXAMPLES / "paddle" / "train.py", tmp_path, "PADDLE_REPORT", PADDLE_ENV
    )
    scratch = tmp_path / "tmp"  # the nodes' TMPDIR: where their launchers' logs go
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    # The runtime is found by name, shipped with tfjob as a cluster has it applied.
    found = run_job(EXAMPLES / "trainjob" / "paddle.yaml", tmp_path, PODS, "PADDLE_REPORT", env)
    assert sorted(found[p]["rank"] for p in PODS) == [0, 1]
    assert {found[p]["trainers"] for p in PODS} == {2}
    first = found[PODS[0]]
    assert all(found[p]["weights"] == first["weights"] for p in PODS)
    assert first["loss"] < 0.05
    assert first["loss"] == pytest.approx(reference["loss"], rel=TOLERANCE)
    assert first["weights"] == pytest.approx(reference["weights"], rel=TOLERANCE, abs=1e-6)
