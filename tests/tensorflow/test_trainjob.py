"""A TensorFlow TrainJob (examples/trainjob/tensorflow.yaml), run with `tfjob run`: 2
workers train examples/tensorflow/multi_worker.py with MultiWorkerMirroredStrategy,
each finding itself in the TF_CONFIG the tensorflow runtime gives it (its task index
expanded from its completion index), and train one model across both processes, as
the TFJob example does (test_examples.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from testkit.examples import run_job

from .test_examples import check_all_reduce, check_checkpoint

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainjob" / "tensorflow.yaml"
PODS = [f"tf-multi-worker-node-0-{i}" for i in range(2)]


def test_a_tensorflow_trainjob_of_two_workers_trains_one_model(tmp_path: Path) -> None:
    env = {**os.environ, "MODEL_DIR": str(tmp_path / "models")}
    env.pop("TF_CONFIG", None)
    found = run_job(EXAMPLE, tmp_path, PODS, "TFJOB_REPORT", env)
    reports = [found[pod] for pod in PODS]
    # What TensorFlow parsed: one cluster of the 2 workers at their local ports, each
    # pod the worker of its completion index, worker 0 TensorFlow's chief.
    cluster = reports[0]["cluster_spec"]
    assert all(r["cluster_spec"] == cluster for r in reports)
    assert list(cluster) == ["worker"]
    assert cluster["worker"] == [f"127.0.0.1:{r['tfjob_port']}" for r in reports]
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in cluster["worker"])
    assert [(r["task_type"], r["task_id"]) for r in reports] == [("worker", 0), ("worker", 1)]
    assert [r["is_chief"] for r in reports] == [True, False]
    check_all_reduce(reports)
    check_checkpoint(reports, tmp_path)
