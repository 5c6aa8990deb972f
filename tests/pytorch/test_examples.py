"""The PyTorch examples, run end to end with `tfjob run` as a user would, each beside
its `tfjob convert` TrainJob (testkit/converted_runs.py): each example runs once, and
both of its tests read that run.

Each rank prints one `PYTORCH_REPORT {json}` line (examples/pytorch/ddp.py). The tests
read them from the replicas' logs and check that the ranks are the ones the job
describes, that they trained together (DistributedDataParallel keeps every rank's
weights equal, which N independent runs on their own shards would not), and that the
result is the single-process run's on the same data: each step's global batch is split
across the ranks and their gradients averaged, so the losses must agree. And that each
conversion succeeds as the PyTorchJob does, its ranks printing the same reports (ranks,
world size, every step's loss; for the elastic job, whose torchrun picks its own
MASTER_PORT, with that port aside).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.converted_runs import Pair, Run, run_both
from testkit.examples import single_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
REPORT = "PYTORCH_REPORT"
TOLERANCE = 1e-5  # relative; the all-reduce sums in another order than one process


@pytest.fixture
def reference(tmp_path: Path) -> dict[str, Any]:
    """The reference: ddp.py alone, one process, no process group."""
    report = single_process(EXAMPLES / "ddp.py", tmp_path, REPORT, ("WORLD_SIZE", "RANK"))
    assert report["world_size"] == 1
    return report


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/pytorch/ddp.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "ddp.yaml", tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="module")
def elastic(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """examples/pytorch/elastic.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "elastic.yaml", tmp_path_factory.mktemp("elastic"))


def _trained_together(found: dict[str, dict[str, Any]], reference: dict[str, Any]) -> None:
    first = next(iter(found.values()))
    for report in found.values():
        # DDP keeps the weights equal on every rank: same checksum, same losses.
        assert report["checksum"] == first["checksum"]
        assert report["losses"] == first["losses"]
    assert first["losses"][-1] < first["losses"][0] / 3  # it learned
    assert first["final_loss"] == pytest.approx(reference["final_loss"], rel=TOLERANCE)
    assert first["checksum"] == pytest.approx(reference["checksum"], rel=TOLERANCE)


def test_ddp_master_and_two_workers_match_one_process(ddp: Pair, reference: dict[str, Any]) -> None:
    pods = ["pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"]
    found = ddp.original.pod_reports(pods, REPORT)
    # RANK: the Master 0, Worker i i+1; WORLD_SIZE 3; one MASTER_ADDR:MASTER_PORT,
    # on this machine.
    assert [found[p]["rank"] for p in pods] == [0, 1, 2]
    assert {found[p]["world_size"] for p in pods} == {3}
    masters = {found[p]["master"] for p in pods}
    assert len(masters) == 1 and masters.pop().startswith("127.0.0.1:")
    assert not any(found[p]["torchrun"] for p in pods)
    _trained_together(found, reference)


def test_the_converted_pytorchjob_trains_as_the_original(ddp: Pair) -> None:
    same = ddp.same_reports(REPORT)
    assert [r["rank"] for r in same] == [0, 1, 2]


def test_elastic_torchrun_workers_match_one_process(
    elastic: Pair, reference: dict[str, Any]
) -> None:
    pods = ["pytorch-elastic-worker-0", "pytorch-elastic-worker-1"]
    found = elastic.original.pod_reports(pods, REPORT)
    # torchrun ran each rank, after a c10d rendezvous at Worker 0's local address.
    assert all(found[p]["torchrun"] for p in pods)
    assert sorted(found[p]["rank"] for p in pods) == [0, 1]
    assert {found[p]["world_size"] for p in pods} == {2}
    endpoints = {found[p]["rdzv_endpoint"] for p in pods}
    assert len(endpoints) == 1 and endpoints.pop().startswith("127.0.0.1:")
    _trained_together(found, reference)


def test_the_converted_elastic_pytorchjob_trains_as_the_original(elastic: Pair) -> None:
    """Its torchrun meets at the TrainJob's first node (tfjob's PET_RDZV_ENDPOINT, a
    local address here too) and picks a MASTER_PORT of its own on `localhost`: the
    reports are the same but for that port (testkit/converted_runs.py)."""
    same = elastic.same_reports(REPORT)
    assert sorted(r["rank"] for r in same) == [0, 1]
    assert all(r["torchrun"] for r in same)
    assert {r["master"] for r in same} == {"localhost:PORT"}
    assert {r["rdzv_endpoint"] for r in same} == {"127.0.0.1:PORT"}
    # What the TrainJob cannot say: elasticPolicy (min:max nodes, here 2:2).
    lost = {line.split(" lost ")[1].split(":")[0] for line in elastic.losses}
    assert lost == {
        "spec.runPolicy.cleanPodPolicy",
        "spec.elasticPolicy",
        "spec.pytorchReplicaSpecs.env[PET_NNODES]",
    }


def test_the_comparison_sets_aside_local_ports_not_hosts(tmp_path: Path) -> None:
    """What the elastic pair's comparison relies on: a port on this machine is set
    aside (torchrun's on `localhost`, tfjob's on 127.0.0.1), a host is not."""

    def printed(name: str, master: str) -> Run:
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "pod.log").write_text(f'{REPORT} {{"master": "{master}", "rank": 0}}\n')
        return Run(0, "", run_dir)

    same = [printed("a", "localhost:34563"), printed("b", "localhost:33737")]
    assert (
        same[0].reports(REPORT)
        == same[1].reports(REPORT)
        == [{"master": "localhost:PORT", "rank": 0}]
    )
    others = [printed(n, m) for n, m in [("c", "127.0.0.1:1"), ("d", "10.0.0.7:1")]]
    assert others[0].reports(REPORT) != same[0].reports(REPORT)
    assert others[1].reports(REPORT) == [{"master": "10.0.0.7:1", "rank": 0}]
