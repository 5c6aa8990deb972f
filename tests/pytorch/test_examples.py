"""The PyTorch examples, run end to end with `tfjob run` as a user would.

Each rank prints one `PYTORCH_REPORT {json}` line (examples/pytorch/ddp.py). The tests
read them from the replicas' logs and check that the ranks are the ones the job
describes, that they trained together (DistributedDataParallel keeps every rank's
weights equal, which N independent runs on their own shards would not), and that the
result is the single-process run's on the same data: each step's global batch is split
across the ranks and their gradients averaged, so the losses must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
TFJOB = [sys.executable, "-c", "from tfjob.interfaces.cli import main; main()"]
RUN_LIMIT = 300.0  # seconds for one job; they take 10-15 s on 2 cores
REPORT = "PYTORCH_REPORT "
TOLERANCE = 1e-5  # relative; the all-reduce sums in another order than one process


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def reports(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(REPORT) :]) for line in text.splitlines() if line.startswith(REPORT)
    ]


def run_example(example: str, tmp_path: Path, pods: list[str]) -> dict[str, dict[str, Any]]:
    """`tfjob run` the example to Succeeded; each pod's report, from its log."""
    run_dir = tmp_path / "run"
    done = _run(
        [*TFJOB, "run", str(EXAMPLES / example), "--run-dir", str(run_dir), "--no-view"], tmp_path
    )
    assert done.returncode == 0, (
        f"{example} did not succeed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    )
    found = {}
    for pod in pods:
        (report,) = reports((run_dir / f"{pod}.log").read_text())
        found[pod] = report
    return found


@pytest.fixture(scope="module")
def single_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference: ddp.py alone, one process, no process group."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK")}
    done = subprocess.run(
        ["python3", str(EXAMPLES / "ddp.py")],
        cwd=tmp_path_factory.mktemp("single"),
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    (report,) = reports(done.stdout)
    assert report["world_size"] == 1
    return report


def _trained_together(found: dict[str, dict[str, Any]], reference: dict[str, Any]) -> None:
    first = next(iter(found.values()))
    for report in found.values():
        # DDP keeps the weights equal on every rank: same checksum, same losses.
        assert report["checksum"] == first["checksum"]
        assert report["losses"] == first["losses"]
    assert first["losses"][-1] < first["losses"][0] / 3  # it learned
    assert first["final_loss"] == pytest.approx(reference["final_loss"], rel=TOLERANCE)
    assert first["checksum"] == pytest.approx(reference["checksum"], rel=TOLERANCE)


def test_ddp_master_and_two_workers_match_one_process(
    tmp_path: Path, single_process: dict[str, Any]
) -> None:
    pods = ["pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"]
    found = run_example("ddp.yaml", tmp_path, pods)
    # RANK: the Master 0, Worker i i+1; WORLD_SIZE 3; one MASTER_ADDR:MASTER_PORT,
    # on this machine.
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["world_size"] for p in pods} == {3}
    masters = {found[p]["master"] for p in pods}
    assert len(masters) == 1 and masters.pop().startswith("127.0.0.1:")
    assert not any(found[p]["torchrun"] for p in pods)
    _trained_together(found, single_process)


def test_elastic_torchrun_workers_match_one_process(
    tmp_path: Path, single_process: dict[str, Any]
) -> None:
    pods = ["pytorch-elastic-worker-0", "pytorch-elastic-worker-1"]
    found = run_example("elastic.yaml", tmp_path, pods)
    # torchrun ran each rank, after a c10d rendezvous at Worker 0's local address.
    assert all(found[p]["torchrun"] for p in pods)
    assert sorted(found[p]["rank"] for p in pods) == [0, 1]
    assert {found[p]["world_size"] for p in pods} == {2}
    endpoints = {found[p]["rdzv_endpoint"] for p in pods}
    assert len(endpoints) == 1 and endpoints.pop().startswith("127.0.0.1:")
    _trained_together(found, single_process)
