"""The TensorFlow examples, run end to end with `tfjob run` as a user would, each
beside its `tfjob convert` TrainJob (testkit/converted_runs.py): each example runs once
for both of its tests (one of the example, one of its conversion).

Each replica prints one `TFJOB_REPORT {json}` line with what TensorFlow parsed from
TF_CONFIG and what training did (examples/tensorflow/README.md). These tests read the
replicas' logs in the run folder and check that the cluster TensorFlow saw is the one
the job describes, that the loss fell, and that training really crossed processes, not
N independent single-process runs. The examples run unmodified; only MODEL_DIR is set
(inherited by the replicas) so that checkpoints land in the test's temporary folder.

The conversions: the converted runtime is tensorflow's, so every pod finds itself in
the TFJob's TF_CONFIG, its task index its completion index.
- multi_worker.yaml (2 workers) and multi_worker_chief.yaml (a chief and 2 workers)
  train one model with MultiWorkerMirroredStrategy; both runs print the same reports
  (the cluster, each task's type and index, the weights, every step's loss, which one
  checkpoints). Before, TF_CONFIG was lost on a type of several pods and the converted
  workers each trained alone (an empty cluster), and succeeded all the same.
- parameter_server.yaml: a chief, 2 PS, 2 workers and an evaluator; training is
  asynchronous (which worker runs which step varies), so the converted run is checked
  as the TFJob is: the same cluster, the variables on both PS, the loss down tenfold,
  the evaluator scoring the chief's final checkpoint. (The example's scripts name
  their checkpoint folder after the job, read from the pod name: `<job>-<type>-<i>` in
  a TFJob, `<job>-<type>-0-<i>` in a TrainJob.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from testkit.converted_runs import Pair, run_both
from testkit.tfjob_cli import TFJOB

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tensorflow"
RUN_LIMIT = 300.0  # seconds for one job; they take 10-60 s on 2 cores
REPORT = "TFJOB_REPORT "
STEP = re.compile(r"^TFJOB_STEP step (\d+) pipeline (\d+) loss \S+$")
MARKER = "----- tfjob "


@dataclass
class Incarnation:
    """One process of a replica, as its log shows it: its report and the steps it ran."""

    report: dict[str, Any]
    steps_by_pipeline: dict[str, int] = field(default_factory=dict)


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MODEL_DIR": str(tmp_path / "models"), "PYTHONUNBUFFERED": "1"}


def _command(example: str, run_dir: Path) -> list[str]:
    return [*TFJOB, "run", str(EXAMPLES / example), "--run-dir", str(run_dir), "--no-view"]


def incarnations(run_dir: Path, pod: str) -> list[Incarnation]:
    """The processes that ran as `pod`, in order (the log is appended across restarts)."""
    found: list[Incarnation] = []
    for line in (run_dir / f"{pod}.log").read_text().splitlines():
        if line.startswith(REPORT):
            report = json.loads(line[len(REPORT) :])
            if found and found[-1].report["pid"] == report["pid"]:
                found[-1].report = report  # the same process reporting again
            else:
                found.append(Incarnation(report))
        elif (step := STEP.match(line)) and found:
            counts = found[-1].steps_by_pipeline
            counts[step.group(2)] = counts.get(step.group(2), 0) + 1
    return found


def final_reports(run_dir: Path, pods: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The report of the last process of each pod; fails if one has none."""
    reports = {}
    for pod in pods:
        found = incarnations(run_dir, pod)
        assert found, f"no {REPORT.strip()} line in {pod}.log"
        reports[pod] = found[-1].report
    return reports


def expected_pods(job: str, counts: dict[str, int]) -> list[str]:
    return [f"{job}-{kind}-{i}" for kind, n in counts.items() for i in range(n)]


def check_cluster(reports: dict[str, dict[str, Any]], job: str, counts: dict[str, int]) -> None:
    """What TensorFlow parsed from TF_CONFIG on every replica matches the job.

    Same cluster everywhere; one list per replica type (evaluator included, as the
    operator does), as many addresses as replicas, each 127.0.0.1 with a port of its
    own; each replica finds itself at its own index, on the port tfjob gave it; and
    TensorFlow's chief is the chief, else worker 0 (the evaluator is its own chief).
    """
    specs = {json.dumps(r["cluster_spec"], sort_keys=True) for r in reports.values()}
    assert len(specs) == 1, f"replicas disagree on the cluster: {specs}"
    cluster = next(iter(reports.values()))["cluster_spec"]
    assert {kind: len(cluster[kind]) for kind in cluster} == counts
    addresses = [a for tasks in cluster.values() for a in tasks]
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in addresses), addresses
    assert len(set(addresses)) == len(addresses), f"ports shared: {addresses}"
    for pod, report in reports.items():
        kind, index = pod.rsplit("-", 2)[1:]
        assert (report["task_type"], report["task_id"]) == (kind, int(index)), pod
        assert cluster[kind][int(index)] == f"127.0.0.1:{report['tfjob_port']}", pod
        chief = kind in ("chief", "evaluator") or (
            kind == "worker" and index == "0" and "chief" not in counts
        )
        assert report["is_chief"] is chief, pod


def check_all_reduce(reports: list[dict[str, Any]]) -> None:
    """MultiWorkerMirroredStrategy trained one model across every process.

    Each replica read a different shard, yet all hold the same weights; step 1 moved
    them exactly as gradient descent on the union of every shard's first batch would,
    not as the replica's own shard alone would; and the all-reduced example count is
    the global batch.
    """
    n = len(reports)
    assert all(r["num_replicas_in_sync"] == n for r in reports)
    assert sorted(r["input_pipeline_id"] for r in reports) == list(range(n))
    for r in reports:
        assert r["global_batch_all_reduced"] == [r["global_batch"]]
        assert r["step1_diff_vs_global_batch"] < 1e-5, r["pod_name"]
        assert r["step1_diff_vs_own_shard"] > 1e-2, r["pod_name"]
    first = reports[0]
    for r in reports[1:]:
        assert r["losses"] == pytest.approx(first["losses"], rel=1e-5)
        assert r["final_weights"] == pytest.approx(first["final_weights"], abs=1e-6)
    losses = first["losses"]
    assert losses[-1] < losses[0] / 100, f"loss did not fall: {losses}"
    assert first["final_weights"] == pytest.approx(first["true_weights"], abs=0.05)


def check_checkpoint(reports: list[dict[str, Any]], model_dir: Path) -> None:
    """Exactly one replica, TensorFlow's chief, kept a checkpoint, under MODEL_DIR."""
    kept = [r for r in reports if r["checkpoint"]]
    assert [r["is_chief"] for r in kept] == [True]
    path = Path(kept[0]["checkpoint"])
    assert model_dir in path.parents
    assert Path(f"{path}.index").is_file()


@dataclass(frozen=True)
class MultiWorker:
    job: str
    counts: dict[str, int]
    pair: Pair


@pytest.fixture(
    scope="module",
    params=[
        ("multi_worker.yaml", "tf-multi-worker", {"worker": 2}),
        ("multi_worker_chief.yaml", "tf-multi-worker-chief", {"chief": 1, "worker": 2}),
    ],
    ids=["multi_worker.yaml", "multi_worker_chief.yaml"],
)
def multi_worker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> MultiWorker:
    """A MultiWorkerMirroredStrategy example and its conversion, run at once."""
    example, job, counts = request.param
    pair = run_both(EXAMPLES / example, tmp_path_factory.mktemp(job))
    return MultiWorker(job, counts, pair)


def test_multi_worker_trains_one_model_across_processes(multi_worker: MultiWorker) -> None:
    original = multi_worker.pair.original
    original.succeeded()
    job, counts = multi_worker.job, multi_worker.counts
    reports = final_reports(original.run_dir, expected_pods(job, counts))
    check_cluster(reports, job, counts)
    check_all_reduce(list(reports.values()))
    check_checkpoint(list(reports.values()), original.model_dir)


def test_the_converted_multi_worker_tfjob_trains_as_the_original(
    multi_worker: MultiWorker,
) -> None:
    same = multi_worker.pair.same_reports(REPORT.strip())
    counts = multi_worker.counts
    tasks = [(kind, i) for kind, n in counts.items() for i in range(n)]
    assert sorted((r["task_type"], r["task_id"]) for r in same) == tasks
    cluster = {kind: ["127.0.0.1:PORT"] * n for kind, n in counts.items()}
    assert all(r["cluster_spec"] == cluster for r in same)


PS_JOB = "tf-parameter-server"
PS_COUNTS = {"chief": 1, "evaluator": 1, "ps": 2, "worker": 2}


def check_parameter_server_training(
    reports: dict[str, dict[str, Any]], model_dir: Path
) -> dict[str, Any]:
    """The coordinator's variables lived on both PS, the loss fell, the side-car evaluator
    scored the final checkpoint. Returns the chief's report."""
    check_cluster(reports, PS_JOB, PS_COUNTS)
    chief = reports[f"{PS_JOB}-chief-0"]
    assert chief["variable_devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    assert chief["losses"][-1] < chief["losses"][0] / 10, chief["losses"]
    assert chief["all_workers_in_last_round"] is True
    assert model_dir in Path(chief["checkpoint"]).parents
    evaluator = reports[f"{PS_JOB}-evaluator-0"]
    steps = [e["step"] for e in evaluator["evaluations"]]
    assert steps == sorted(steps) and steps[-1] == chief["global_step"]
    assert chief["final_eval_loss"] == evaluator["losses"][-1] < 0.05
    for kind in ("ps", "worker"):
        for i in range(PS_COUNTS[kind]):
            assert reports[f"{PS_JOB}-{kind}-{i}"]["losses"] is None  # they only serve
    return chief


@pytest.fixture(scope="module")
def parameter_server(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """parameter_server.yaml and its conversion, run at once."""
    return run_both(EXAMPLES / "parameter_server.yaml", tmp_path_factory.mktemp("ps"))


def test_parameter_server_trains_on_workers_with_variables_on_ps(parameter_server: Pair) -> None:
    original = parameter_server.original
    original.succeeded()
    run_dir = original.run_dir
    reports = final_reports(run_dir, expected_pods(PS_JOB, PS_COUNTS))
    chief = check_parameter_server_training(reports, original.model_dir)

    # Each worker process ran steps (its log shows them under its own pipeline), and
    # the chief got back exactly the steps the two worker logs show.
    by_worker = [incarnations(run_dir, f"{PS_JOB}-worker-{i}") for i in range(2)]
    assert [len(found) for found in by_worker] == [1, 1]
    counted = {}
    for (only,) in by_worker:
        assert len(only.steps_by_pipeline) == 1 and min(only.steps_by_pipeline.values()) > 0
        counted.update(only.steps_by_pipeline)
    assert len(counted) == 2
    assert chief["steps_per_pipeline"] == counted
    assert chief["global_step"] == chief["steps"] == sum(counted.values())


def test_the_converted_parameter_server_tfjob_trains_as_the_original(
    parameter_server: Pair,
) -> None:
    """The checks the TFJob passes (above), made of the TrainJob's pods."""
    run = parameter_server.converted
    run.succeeded()
    tasks = {(r["task_type"], r["task_id"]): r for r in run.raw_reports(REPORT.strip())}
    assert sorted(tasks) == [
        ("chief", 0), ("evaluator", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)
    ]  # fmt: skip
    for report in tasks.values():
        shape = {t: len(a) for t, a in report["cluster_spec"].items()}
        assert shape == PS_COUNTS
    chief, evaluator = tasks[("chief", 0)], tasks[("evaluator", 0)]
    assert chief["variable_devices"] == [
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:ps/replica:0/task:1/device:CPU:0",
    ]
    assert chief["losses"][-1] < chief["losses"][0] / 10, chief["losses"]
    assert chief["all_workers_in_last_round"] is True
    assert evaluator["evaluations"][-1]["step"] == chief["global_step"]
    assert chief["final_eval_loss"] == evaluator["losses"][-1] < 0.05


def _replica_processes(pod: str, run: int) -> list[psutil.Process]:
    """The example's Python processes running as `pod` (found by their TFJOB_POD_NAME)
    under the `tfjob run` of pid `run`: another run of the same example (another test,
    on another worker) has the same pod names."""
    found = []
    for proc in psutil.Process(run).children(recursive=True):
        try:
            if "parameter_server.py" in " ".join(proc.cmdline()) and (
                proc.environ().get("TFJOB_POD_NAME") == pod
            ):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _later_incarnations(run_dir: Path, pod: str) -> list[Incarnation]:
    """Every process of `pod` after the first; [] while the log ends mid-line."""
    try:
        return incarnations(run_dir, pod)[1:]
    except json.JSONDecodeError:
        return []


def _wait_for(condition: Any, what: str, tfjob: subprocess.Popen[str], limit: float) -> Any:
    """Poll `condition()` until truthy; fail if tfjob ends first or `limit` s pass."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if (value := condition()) and value:
            return value
        if tfjob.poll() is not None:
            pytest.fail(f"tfjob ended (exit {tfjob.returncode}) before {what}")
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {limit:.0f}s")


def test_killed_worker_is_restarted_and_taken_back(tmp_path: Path) -> None:
    """Under restartPolicy ExitCode a SIGKILLed worker (exit 137) is recreated by tfjob,
    the coordinator sends it steps again, and the job still succeeds."""
    run_dir = tmp_path / "run"
    victim_pod = f"{PS_JOB}-worker-1"
    victim_log = run_dir / f"{victim_pod}.log"
    with (tmp_path / "tfjob.out").open("w") as out:
        tfjob = subprocess.Popen(
            _command("parameter_server.yaml", run_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(tmp_path),
        )
    try:
        _wait_for(
            lambda: victim_log.is_file() and "TFJOB_STEP" in victim_log.read_text(),
            "worker-1 ran a training step",
            tfjob,
            limit=180,
        )
        (victim,) = _replica_processes(victim_pod, tfjob.pid)
        victim.send_signal(signal.SIGKILL)
        # The new process announces itself in the same log; it must be a live process
        # that tfjob started as worker-1, not the victim.
        second_start = _wait_for(
            lambda: _later_incarnations(run_dir, victim_pod),
            "a new worker-1 process started",
            tfjob,
            limit=120,
        )
        replacement = psutil.Process(second_start[0].report["pid"])
        assert replacement.environ().get("TFJOB_POD_NAME") == victim_pod
        code = tfjob.wait(timeout=RUN_LIMIT)
    finally:
        if tfjob.poll() is None:
            tfjob.kill()
            tfjob.wait()
    output = (tmp_path / "tfjob.out").read_text()
    assert code == 0, f"the job did not succeed:\n{output[-4000:]}"
    assert re.search(rf"{victim_pod} exited with code 137\b", output), "not killed as expected"

    first, second = incarnations(run_dir, victim_pod)
    assert first.report["pid"] == victim.pid != second.report["pid"]
    log = victim_log.read_text()
    assert log.index(MARKER, log.index(REPORT)) < log.rindex(REPORT), "no tfjob marker line"

    reports = final_reports(run_dir, expected_pods(PS_JOB, PS_COUNTS))
    chief = check_parameter_server_training(reports, tmp_path / "models")
    # The replacement built a new input pipeline and ran steps the chief got back.
    (old,) = first.steps_by_pipeline
    (new,) = second.steps_by_pipeline
    assert new != old
    assert chief["steps_per_pipeline"][new] > 0
    assert chief["steps_per_pipeline"].get(old, 0) <= first.steps_by_pipeline[old]
    # Every step the chief counted came from worker-0, the killed worker-1 (none, if it
    # died before a result got back) or its replacement: nothing else trained.
    (worker0,) = incarnations(run_dir, victim_pod.replace("worker-1", "worker-0"))
    known = {*worker0.steps_by_pipeline, old, new}
    assert set(chief["steps_per_pipeline"]) <= known
    assert {*worker0.steps_by_pipeline, new} <= set(chief["steps_per_pipeline"])
