"""`tfjob convert` of TFJobs, each run with `tfjob run` beside the original
(testkit/converted_runs.py). The converted runtime is tensorflow's, so every pod
finds itself in the TFJob's TF_CONFIG, its task index its completion index:
- examples/tensorflow/multi_worker.yaml: 2 workers train one model with
  MultiWorkerMirroredStrategy; both runs print the same reports (the cluster of 2,
  each task's type and index, the weights, every step's loss, which one checkpoints).
  Before, TF_CONFIG was lost on a type of several pods and the converted workers each
  trained alone (an empty cluster), and succeeded all the same.
- examples/ping/job.yaml: a chief, a PS and 2 workers reach each other at the
  addresses TF_CONFIG names; both runs print the same lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from testkit.converted_runs import run_both

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_converted_multi_worker_tfjob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLES / "tensorflow" / "multi_worker.yaml", tmp_path)
    assert pair.original.returncode == 0, pair.original.output[-3000:]
    assert pair.converted.returncode == 0, pair.converted.output[-3000:]
    reports = pair.original.reports("TFJOB_REPORT")
    assert sorted((r["task_type"], r["task_id"]) for r in reports) == [("worker", 0), ("worker", 1)]
    assert reports[0]["cluster_spec"] == {"worker": ["127.0.0.1:PORT"] * 2}
    assert pair.converted.reports("TFJOB_REPORT") == reports


def test_the_converted_chief_ps_worker_tfjob_reaches_every_task(tmp_path: Path) -> None:
    pair = run_both(EXAMPLES / "ping" / "job.yaml", tmp_path)
    assert pair.original.returncode == 0, pair.original.output[-3000:]
    assert pair.converted.returncode == 0, pair.converted.output[-3000:]
    original, converted = (
        sorted(
            re.sub(r"127\.0\.0\.1:\d+", "PORT", line)
            for line in run.lines()
            if not line.startswith("----- tfjob ")  # the log's own marker (pod, time)
        )
        for run in (pair.original, pair.converted)
    )
    assert "chief reached all 2 workers: TF_CONFIG and ports are right" in original
    assert converted == original
    assert pair.losses == []
