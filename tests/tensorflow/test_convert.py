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
- examples/tensorflow/parameter_server.yaml: a chief, 2 PS, 2 workers and an
  evaluator; training is asynchronous (which worker runs which step varies), so the
  converted run is checked as test_examples.py checks the TFJob it runs: the same cluster, the
  variables on both PS, the loss down tenfold, the evaluator scoring the chief's final
  checkpoint. (The example's scripts name their checkpoint folder after the job, read
  from the pod name: `<job>-<type>-<i>` in a TFJob, `<job>-<type>-0-<i>` in a TrainJob.)
"""

from __future__ import annotations

import re
from pathlib import Path

from testkit.converted_runs import run_both, run_converted

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_converted_multi_worker_tfjob_trains_as_the_original(tmp_path: Path) -> None:
    pair = run_both(EXAMPLES / "tensorflow" / "multi_worker.yaml", tmp_path)
    reports = pair.same_reports("TFJOB_REPORT")
    assert sorted((r["task_type"], r["task_id"]) for r in reports) == [("worker", 0), ("worker", 1)]
    assert reports[0]["cluster_spec"] == {"worker": ["127.0.0.1:PORT"] * 2}


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


def test_the_converted_parameter_server_tfjob_trains_as_the_original(tmp_path: Path) -> None:
    run = run_converted(EXAMPLES / "tensorflow" / "parameter_server.yaml", tmp_path)
    # The checks test_examples.py makes of the original, which it runs.
    assert run.returncode == 0, run.output[-3000:]
    tasks = {(r["task_type"], r["task_id"]): r for r in run.raw_reports("TFJOB_REPORT")}
    assert sorted(tasks) == [
        ("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)
    ]  # fmt: skip
    for report in tasks.values():
        shape = {t: len(a) for t, a in report["cluster_spec"].items()}
        assert shape == {"chief": 1, "evaluator": 1, "ps": 2, "worker": 2}
    chief, evaluator = tasks[("chief", 0)], tasks[("evaluator", 0)]
    assert chief["variable_devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    assert chief["losses"][-1] < chief["losses"][0] / 10, chief["losses"]
    assert chief["all_workers_in_last_round"] is True
    assert evaluator["evaluations"][-1]["step"] == chief["global_step"]
    assert chief["final_eval_loss"] == evaluator["losses"][-1] < 0.05
