"""`tfjob convert` of the TFJobs that need no TensorFlow, each run with `tfjob run`
beside the original (testkit/converted_runs.py); that pair is the original's only run
here. (The TensorFlow examples' conversions run beside them: test_examples.py.)
- examples/ping/job.yaml: a chief, a PS and 2 workers reach each other at the
  addresses TF_CONFIG names; both runs print the same lines.
- examples/kueue/tfjob.yaml: a TFJob queued in a LocalQueue; without Kueue (locally)
  it runs at once, and so does its conversion, which keeps the queue's labels (Kueue's
  TrainJob integration reads the same ones); both runs print the same lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from testkit import fast_yaml
from testkit.converted_runs import Pair, run_both

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _printed(pair: Pair) -> tuple[list[str], list[str]]:
    """Both runs succeeded: every line their pods printed, ports aside, sorted."""
    pair.original.succeeded()
    pair.converted.succeeded()
    original, converted = (
        sorted(
            re.sub(r"127\.0\.0\.1:\d+", "PORT", line)
            for line in run.lines()
            if not line.startswith("----- tfjob ")  # the log's own marker (pod, time)
        )
        for run in (pair.original, pair.converted)
    )
    return original, converted


def test_the_converted_chief_ps_worker_tfjob_reaches_every_task(tmp_path: Path) -> None:
    pair = run_both(EXAMPLES / "ping" / "job.yaml", tmp_path)
    original, converted = _printed(pair)
    assert "chief reached all 2 workers: TF_CONFIG and ports are right" in original
    assert converted == original
    assert pair.losses == []


def test_the_converted_queued_tfjob_runs_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLES / "kueue" / "tfjob.yaml", tmp_path)
    original, converted = _printed(pair)
    # A TFJob without a chief succeeds with worker 0: worker 1 may be stopped before
    # it prints (a busy machine starts it later); the TrainJob waits for both nodes.
    assert set(original) == {"trained"} and set(converted) == {"trained"}
    assert len(converted) == 2
    documents = list(fast_yaml.load_all(pair.conversion))
    (trainjob,) = [d for d in documents if d["kind"] == "TrainJob"]
    assert trainjob["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "training",
        "kueue.x-k8s.io/priority-class": "low",
    }
    # Named lost: when the job is over (a TFJob without a Chief ends with Worker 0, a
    # JobSet with every pod); here every worker succeeds either way.
    assert [line.split(" lost ")[1].split(":")[0] for line in pair.losses] == [
        "spec.tfReplicaSpecs"
    ]
