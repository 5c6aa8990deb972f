"""A TrainJob on Trainer's torch-distributed runtime, run with `tfjob run` as a user
would (examples/trainjob/torch-ddp.yaml): 2 nodes of torchrun with 2 processes each
train examples/pytorch/ddp.py with DistributedDataParallel, and match one process, as
the PyTorchJob examples do (test_examples.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from testkit import fast_yaml
from testkit.examples import RUN_LIMIT, TFJOB, reports
from tests.pytorch.test_examples import REPORT, _trained_together, reference

__all__ = ["reference"]  # the fixture, shared with test_examples.py
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob" / "torch-ddp.yaml"


def test_a_torch_trainjob_of_two_nodes_trains_as_one_process(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [*TFJOB, "run", str(EXAMPLE), "--run-dir", str(run_dir), "--no-view"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}{done.stderr[-2000:]}"
    found = {}
    for node in ("torch-ddp-node-0-0", "torch-ddp-node-0-1"):
        for report in reports((run_dir / f"{node}.log").read_text(), REPORT):
            found[(node, report["rank"])] = report
    # torchrun on each node: ranks 0-1 on node 0 (PET_NODE_RANK 0), 2-3 on node 1.
    assert sorted(found) == [
        ("torch-ddp-node-0-0", 0), ("torch-ddp-node-0-0", 1),
        ("torch-ddp-node-0-1", 2), ("torch-ddp-node-0-1", 3),
    ]  # fmt: skip
    assert all(r["torchrun"] and r["world_size"] == 4 for r in found.values())
    masters = {r["master"] for r in found.values()}
    assert len(masters) == 1 and masters.pop().startswith("127.0.0.1:")
    _trained_together({f"{n}/{rank}": r for (n, rank), r in found.items()}, reference)
    final = fast_yaml.load((run_dir / "trainjob.yaml").read_text())
    assert [c["type"] for c in final["status"]["conditions"]] == ["Complete"]
