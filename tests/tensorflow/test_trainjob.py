"""A TensorFlow TrainJob (examples/trainjob/tensorflow.yaml), run with `tfjob run`: 2
workers train examples/tensorflow/multi_worker.py with MultiWorkerMirroredStrategy,
each finding itself in the TF_CONFIG the tensorflow runtime gives it (its task index
expanded from its completion index), and train one model across both processes, as
the TFJob example does (test_examples.py). And a parameter-server TrainJob
(examples/trainjob/tensorflow-ps.yaml) on tensorflow-distributed, which ends with its
chief."""

from __future__ import annotations

import os
import re
from pathlib import Path

from testkit import fast_yaml
from testkit.examples import run_job

from .test_examples import check_all_reduce, check_checkpoint, incarnations

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
    check_checkpoint(reports, tmp_path / "models")


PS_EXAMPLE = EXAMPLE.with_name("tensorflow-ps.yaml")
PS_TRAINJOB = "tf-parameter-server"
PS_TASKS = {
    "chief": ("chief", 1),
    "ps": ("ps", 2),
    "worker": ("node", 2),
    "evaluator": ("evaluator", 1),
}


def test_a_parameter_server_trainjob_ends_with_its_chief(tmp_path: Path) -> None:
    """examples/trainjob/tensorflow-ps.yaml on tensorflow-distributed: the chief trains
    with its variables on both PS and steps run on both workers, the evaluator scores
    the final checkpoint, and the TrainJob completes when the chief does, though the
    PS and workers never exit by themselves (the run stops them), as a TFJob does."""
    env = {**os.environ, "MODEL_DIR": str(tmp_path / "models")}
    env.pop("TF_CONFIG", None)
    pods = {
        (kind, i): f"{PS_TRAINJOB}-{job}-0-{i}"
        for kind, (job, n) in PS_TASKS.items()
        for i in range(n)
    }
    found = run_job(PS_EXAMPLE, tmp_path, list(pods.values()), "TFJOB_REPORT", env)
    # Each pod is the task of its replicated job and completion index, in one cluster.
    for (kind, i), pod in pods.items():
        report = found[pod]
        assert (report["task_type"], report["task_id"]) == (kind, i), pod
        shape = {t: len(a) for t, a in report["cluster_spec"].items()}
        assert shape == {kind: n for kind, (_, n) in PS_TASKS.items()}, pod
    chief, evaluator = found[pods["chief", 0]], found[pods["evaluator", 0]]
    assert chief["variable_devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    assert chief["losses"][-1] < chief["losses"][0] / 10, chief["losses"]
    assert chief["all_workers_in_last_round"] is True
    assert tmp_path / "models" in Path(chief["checkpoint"]).parents
    assert evaluator["evaluations"][-1]["step"] == chief["global_step"]
    assert chief["final_eval_loss"] == evaluator["losses"][-1] < 0.05
    # The steps ran on the workers: each worker's log shows its own, and they add up
    # to the chief's.
    run_dir = tmp_path / "run"
    counted: dict[str, int] = {}
    for i in range(2):
        (only,) = incarnations(run_dir, pods["worker", i])
        assert len(only.steps_by_pipeline) == 1
        counted.update(only.steps_by_pipeline)
    assert chief["steps_per_pipeline"] == counted
    assert chief["global_step"] == sum(counted.values())
    # The JobSet completed with the chief's Job alone: PS and workers were serving.
    jobset = fast_yaml.load((run_dir / "jobset.yaml").read_text())
    assert jobset["status"]["conditions"][0]["type"] == "Completed"
    succeeded = {r["name"]: r["succeeded"] for r in jobset["status"]["replicatedJobsStatus"]}
    assert succeeded["chief"] == 1
    assert succeeded["ps"] == succeeded["node"] == 0
