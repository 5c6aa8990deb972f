"""`tfjob run` of a TrainJob, without a framework: each node is a tiny Python program
that prints the env it got and reaches node 0 at the address that env names, as
torch's, JAX's and XGBoost's own rendezvous would (tests/pytorch trains with torch).

The runtime comes from Trainer's shipped ClusterTrainingRuntimes, from the TrainJob's
file, or from --runtime FILE; the verdicts (Complete, Failed, refused) are the ones a
cluster gives."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testkit import fast_yaml
from testkit.run_processes import gone_within
from testkit.tfjob_cli import REPO, start_tfjob, tfjob, write
from tfjob.interfaces.job_files import BadInput, read_trainer_file
from tfjob.runtimes.local.jobset_pods import pods_of
from tfjob.runtimes.local.launch import declared_env

# argv: the variables naming node 0's address (host and port, or one host:port), this
# node's rank and the node count. Prints them (and sys.prefix) as JSON; node 0 then
# serves that address until every other node has connected to it.
NODE = """
import json, os, socket, sys, time
host_var, port_var, rank_var, size_var = sys.argv[1:5]
env = {k: os.environ.get(k) for k in (host_var, port_var, rank_var, size_var, "TFJOB_PORT")}
env["prefix"] = sys.prefix
print("ENV " + json.dumps(env), flush=True)
host, port = os.environ[host_var], os.environ.get(port_var)
if port is None:
    host, port = host.rsplit(":", 1)
address = (host, int(port))
if os.environ[rank_var] == "0":
    server = socket.create_server(address)
    for _ in range(int(os.environ[size_var]) - 1):
        server.accept()[0].close()
    print("node 0: every node reached me", flush=True)
else:
    for _ in range(200):
        try:
            socket.create_connection(address, timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(3)
    print("reached node 0", flush=True)
"""
TORCH_VARS = ["PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NODE_RANK", "PET_NNODES"]
JAX_VARS = ["JAX_COORDINATOR_ADDRESS", "-", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES"]
XGBOOST_VARS = ["DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"]
MALFORMED = REPO / "tests/fixtures/malformed-trainjob"


def _trainjob(
    name: str, runtime: str, nodes: int, command: list[str], **ref: str
) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, **ref},
            "trainer": {"numNodes": nodes, "command": command},
        },
    }


def _runtime(name: str, policy: dict[str, Any], jobs: list[dict[str, Any]], **spec: Any
             ) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": jobs, **spec}}},
    }


def _job(name: str, command: list[str] | None = None, *, trainer: bool = True, **job_spec: Any
         ) -> dict[str, Any]:  # fmt: skip
    container: dict[str, Any] = {"name": "node", "image": "python"}
    if command is not None:
        container["command"] = command
    metadata = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    return {
        "name": name,
        "template": {
            **({"metadata": metadata} if trainer else {}),
            "spec": {**job_spec, "template": {"spec": {"containers": [container]}}},
        },
    }


def _node(variables: list[str]) -> list[str]:
    return ["python3", "-c", NODE, *variables]


def _run(tmp_path: Path, *documents: dict[str, Any], extra: tuple[str, ...] = ()) -> Any:
    path = write(tmp_path / "trainjob.yaml", *documents)
    return tfjob("run", str(path), "--run-dir", str(tmp_path / "run"), "--no-view", *extra)


def _envs(run_dir: Path, pods: list[str]) -> list[dict[str, str]]:
    found = []
    for pod in pods:
        lines = (run_dir / f"{pod}.log").read_text().splitlines()
        found += [json.loads(line[4:]) for line in lines if line.startswith("ENV ")]
    return found


def _final(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = fast_yaml.load((run_dir / "trainjob.yaml").read_text())
    return document


def _condition(run_dir: Path) -> tuple[str, str, str]:
    (condition,) = [c for c in _final(run_dir)["status"]["conditions"] if c["status"] == "True"]
    return condition["type"], condition["reason"], condition["message"]


def test_torch_nodes_of_a_shipped_runtime_reach_node_0_here(tmp_path: Path) -> None:
    result = _run(tmp_path, _trainjob("tt", "torch-distributed", 3, _node(TORCH_VARS)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[tt-node-0-0] node 0: every node reached me" in result.stdout.splitlines()
    envs = _envs(tmp_path / "run", [f"tt-node-0-{i}" for i in range(3)])
    assert [e["PET_NODE_RANK"] for e in envs] == ["0", "1", "2"]  # the completion index
    assert {e["PET_NNODES"] for e in envs} == {"3"}
    # Node 0's address: this machine, at the port tfjob chose for node 0 (not 29500).
    assert {(e["PET_MASTER_ADDR"], e["PET_MASTER_PORT"]) for e in envs} == {
        ("127.0.0.1", envs[0]["TFJOB_PORT"])
    }
    assert len({e["TFJOB_PORT"] for e in envs}) == 3
    # `python3` is the interpreter tfjob runs in.
    assert {e["prefix"] for e in envs} == {sys.prefix}
    assert _condition(tmp_path / "run") == (
        "Complete", "AllJobsCompleted", "jobset completed successfully"
    )  # fmt: skip
    jobset = fast_yaml.load((tmp_path / "run" / "jobset.yaml").read_text())
    assert jobset["status"]["replicatedJobsStatus"][0]["succeeded"] == 1


def test_a_training_runtime_in_the_same_file_gives_the_jax_coordinator(tmp_path: Path) -> None:
    runtime = _runtime("my-jax", {"numNodes": 1, "jax": {}}, [_job("node")])
    trainjob = _trainjob("tj", "my-jax", 2, _node(JAX_VARS), kind="TrainingRuntime")
    result = _run(tmp_path, runtime, trainjob)
    assert result.returncode == 0, result.stdout + result.stderr
    envs = _envs(tmp_path / "run", ["tj-node-0-0", "tj-node-0-1"])
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1"]
    assert {e["JAX_COORDINATOR_ADDRESS"] for e in envs} == {f"127.0.0.1:{envs[0]['TFJOB_PORT']}"}


def test_a_runtime_file_gives_the_xgboost_tracker(tmp_path: Path) -> None:
    runtime = {
        **_runtime("xgb", {"numNodes": 1, "xgboost": {}}, [_job("node")]),
        "kind": "ClusterTrainingRuntime",
    }
    runtime_file = write(tmp_path / "runtime.yaml", runtime)
    result = _run(
        tmp_path,
        _trainjob("tx", "xgb", 2, _node(XGBOOST_VARS)),
        extra=("--runtime", str(runtime_file)),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    envs = _envs(tmp_path / "run", ["tx-node-0-0", "tx-node-0-1"])
    assert [e["DMLC_TASK_ID"] for e in envs] == ["0", "1"]
    assert {(e["DMLC_TRACKER_URI"], e["DMLC_TRACKER_PORT"]) for e in envs} == {
        ("127.0.0.1", envs[0]["TFJOB_PORT"])
    }


def test_a_success_policy_on_one_job_completes_while_another_still_runs(tmp_path: Path) -> None:
    """JobSet's success policy, `All` of the targeted jobs: the node job's end completes
    the TrainJob though the server job never ends; the server is then stopped. Its
    init container (which would fail) is not run, and the run says so."""
    server = _job("server", ["python3", "-c", "import time; time.sleep(600)"], trainer=False)
    init = {"name": "wait", "image": "busybox", "command": ["false"]}
    server["template"]["spec"]["template"]["spec"]["initContainers"] = [init]
    runtime = _runtime(
        "pair",
        {"numNodes": 1},
        [server, _job("node")],
        successPolicy={"operator": "All", "targetReplicatedJobs": ["node"]},
    )
    trainjob = _trainjob(
        "sp", "pair", 2, ["python3", "-c", "print('done')"], kind="TrainingRuntime"
    )
    result = _run(tmp_path, runtime, trainjob)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "JobSet replicatedJobs[server]: init containers are not run locally" in result.stdout
    assert _condition(tmp_path / "run")[0] == "Complete"
    jobs = {j["name"]: j for j in _final(tmp_path / "run")["status"]["jobsStatus"]}
    assert (jobs["node"]["succeeded"], jobs["server"]["active"]) == (1, 1)


def test_a_failing_node_fails_the_trainjob_after_its_retries(tmp_path: Path) -> None:
    """restartPolicy Never, backoffLimit 1: the failed pod is replaced once (same host
    name), then the Job and the JobSet fail, and so does the TrainJob: exit 1."""
    fail = ["python3", "-c", "import os, sys; sys.exit(int(os.environ['PET_NODE_RANK']) * 7)"]
    node = _job("node", backoffLimit=1)
    node["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    runtime = _runtime("once", {"numNodes": 1, "torch": {}}, [node])
    result = _run(tmp_path, runtime, _trainjob("tf", "once", 2, fail, kind="TrainingRuntime"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "tf-node-0-1-retry1" in result.stdout
    assert "tf-node-0-1-retry2" not in result.stdout
    assert _condition(tmp_path / "run") == (
        "Failed",
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: tf-node-0)",
    )
    assert "tf failed: jobset failed" in result.stderr


def test_the_active_deadline_fails_the_trainjob_and_stops_its_nodes(tmp_path: Path) -> None:
    trainjob = _trainjob(
        "dl", "torch-distributed", 1, ["python3", "-c", "import time; time.sleep(60)"]
    )
    trainjob["spec"]["activeDeadlineSeconds"] = 1
    result = _run(tmp_path, trainjob)
    assert result.returncode == 1
    assert _condition(tmp_path / "run")[1:] == (
        "DeadlineExceeded", "TrainJob exceeded its active deadline"
    )  # fmt: skip


def test_a_missing_runtime_fails_as_on_a_cluster(tmp_path: Path) -> None:
    result = _run(tmp_path, _trainjob("nr", "no-such-runtime", 1, ["python3", "-V"]))
    assert result.returncode == 1
    reason, message = _condition(tmp_path / "run")[1:]
    assert reason == "TrainingRuntimeNotFound"
    assert '"no-such-runtime" not found' in message
    assert "torch-distributed" in result.stdout  # the note names the shipped runtimes


def test_a_command_not_on_path_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = _run(tmp_path, _trainjob("np", "torch-distributed", 2, ["no-such-program-x"]))
    assert result.returncode == 2
    assert (
        'spec.trainer.command[0]: "no-such-program-x" is not an executable on PATH' in result.stderr
    )
    assert not (tmp_path / "run").exists()


def test_a_bad_trainjob_is_refused_with_exit_2_and_nothing_started(tmp_path: Path) -> None:
    bad = MALFORMED / "trainjob" / "01-zero-nodes.yaml"
    result = tfjob("run", str(bad), "--run-dir", str(tmp_path / "run"), "--no-view")
    assert result.returncode == 2
    assert "spec.trainer.numNodes must be at least 1" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "fixture",
    sorted((MALFORMED / "trainjob").glob("*.yaml"))
    + sorted((MALFORMED / "runtime").glob("*.yaml")),
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_every_malformed_trainjob_or_runtime_is_refused_as_at_apply(fixture: Path) -> None:
    """The verdict of `kubectl apply` with tfjob's CRDs: each fixture's `# message:`."""
    expected = next(
        line.split("# message:", 1)[1].strip()
        for line in fixture.read_text().splitlines()
        if line.startswith("# message:")
    )
    with pytest.raises(BadInput) as refused:
        read_trainer_file(fixture, require_image=False)
    assert expected in refused.value.format_message()


@pytest.mark.skipif(
    shutil.which("mpirun") is None, reason="no mpirun (apt-get install openmpi-bin)"
)
def test_an_mpi_runtime_runs_mpirun_from_the_launcher_with_local_slots(tmp_path: Path) -> None:
    """deepspeed-distributed, 2 nodes (the launcher is one): mpirun starts 2 ranks here,
    as the hostfile's slots allow; the node pod waits in place of its sshd."""
    # One write per rank: both ranks' output reaches the launcher's, and an unbuffered
    # print (PYTHONUNBUFFERED=1, as the environment may set) writes its parts apart.
    rank = "import os; e = os.environ; os.write(1, f\"rank {e['OMPI_COMM_WORLD_RANK']} " \
           "of {e['OMPI_COMM_WORLD_SIZE']}\\n\".encode())"  # fmt: skip
    trainjob = _trainjob("mp", "deepspeed-distributed", 2, ["mpirun", "python3", "-c", rank])
    result = _run(tmp_path, trainjob)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = set(result.stdout.splitlines())
    assert {"[mp-launcher-0-0] rank 0 of 2", "[mp-launcher-0-0] rank 1 of 2"} <= lines
    assert _condition(tmp_path / "run")[0] == "Complete"


def test_each_host_name_maps_to_its_own_port_even_when_one_prefixes_another() -> None:
    """`tj-node-0-1` is a prefix of `tj-node-0-10`: each must get its own port; an
    address with the subdomain and a port, and a `*_PORT` beside an address, too."""
    env = [
        {"name": "ONE", "value": "tj-node-0-1.tj"},
        {"name": "TEN", "value": "tj-node-0-10.tj.default.svc:29500"},
        {"name": "TEN_PORT", "value": "29500"},
        {"name": "OTHER", "value": "tj-node-0-1x"},
    ]
    container = {"name": "node", "command": ["x"], "env": env, "ports": [{"containerPort": 29500}]}
    jobset = {
        "metadata": {"name": "tj"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "parallelism": 11,
                            "completions": 11,
                            "template": {"spec": {"containers": [container]}},
                        }
                    },
                }
            ]
        },
    }
    pods = pods_of(jobset, "default")
    assert [p.hostname for p in pods] == [f"tj-node-0-{i}" for i in range(11)]
    port = {p.hostname: p.port for p in pods}
    got = {e["name"]: e["value"] for e in pods[3].manifest["spec"]["containers"][0]["env"]}
    assert got == {
        "TFJOB_PORT": str(port["tj-node-0-3"]),
        "ONE": "127.0.0.1",
        "TEN": f"127.0.0.1:{port['tj-node-0-10']}",
        "TEN_PORT": str(port["tj-node-0-10"]),  # TEN's, the address of its stem
        "OTHER": "tj-node-0-1x",
    }
    assert (
        pods[3].manifest["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        == "3"
    )


# Every TF task binds the address TF_CONFIG gives it, then reaches every other task at
# the address TF_CONFIG names and waits to be reached by all of them: a barrier over
# the cluster TensorFlow would use. Then, as in parameter-server training, the chief
# alone exits: every other task prints its line, tells the chief, and serves until
# stopped; the chief exits once every other task has told it (so every line is out).
TF_TASK = """
import json, os, socket, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
addresses = [a for t in config["cluster"].values() for a in t]
own = config["cluster"][task["type"]][task["index"]]
chief = config["cluster"]["chief"][0]
host, port = own.rsplit(":", 1)
assert port == os.environ["TFJOB_PORT"], (own, os.environ["TFJOB_PORT"])
server = socket.create_server((host, int(port)), backlog=2 * len(addresses))
def reach(peer, word):
    for _ in range(400):
        try:
            with socket.create_connection(tuple(peer.rsplit(":", 1)), timeout=1) as s:
                s.sendall(word)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{own} cannot reach {peer}")
def heard():
    conn, words = server.accept()[0], b""
    with conn:
        while data := conn.recv(16):
            words += data
    return words
for peer in addresses:
    if peer != own:
        reach(peer, b"")
line = f"TASK {task['type']} {task['index']} of " + str(sorted((t, len(a)) for t, a in config["cluster"].items()))
if own != chief:
    for _ in addresses[1:]:
        heard()
    print(line, flush=True)
    reach(chief, b"done")
    time.sleep(600)
words = [heard() for _ in range(2 * (len(addresses) - 1))]
assert sorted(words) == [b""] * (len(addresses) - 1) + [b"done"] * (len(addresses) - 1), words
print(line, flush=True)
"""


def test_the_shipped_tensorflow_runtime_gives_every_task_its_tf_config(tmp_path: Path) -> None:
    """tensorflow-distributed, found by name as on a cluster: a chief, 2 PS, the 3
    workers of numNodes and an evaluator, each its own task in one TF_CONFIG at this
    machine's ports, all reaching each other; the TrainJob completes with its chief,
    the other tasks still serving (the run stops them)."""
    trainjob = _trainjob("tf", "tensorflow-distributed", 3, ["python3", "-c", TF_TASK])
    result = _run(tmp_path, trainjob)
    assert result.returncode == 0, result.stdout + result.stderr
    shape = "of [('chief', 1), ('evaluator', 1), ('ps', 2), ('worker', 3)]"
    tasks = {line.split("] ", 1)[1] for line in result.stdout.splitlines() if "] TASK " in line}
    assert tasks == {
        f"TASK {t} {i} {shape}"
        for t, n in (("chief", 1), ("ps", 2), ("worker", 3), ("evaluator", 1))
        for i in range(n)
    }
    assert _condition(tmp_path / "run")[0] == "Complete"
    # The chief's Job alone succeeded: the others' tasks were serving when it ended.
    jobset = fast_yaml.load((tmp_path / "run" / "jobset.yaml").read_text())
    succeeded = {r["name"]: r["succeeded"] for r in jobset["status"]["replicatedJobsStatus"]}
    assert succeeded == {"chief": 1, "ps": 0, "node": 0, "evaluator": 0}


def test_a_host_name_completed_by_a_reference_maps_as_the_kubelet_expands_it() -> None:
    """Paddle's POD_IP is `<tj>-node-0-$(TFJOB_POD_INDEX).<tj>`, the index from the
    downward API: mapped after the expansion, it is 127.0.0.1 on every pod (it stayed
    a host name, which Paddle's launcher could not reach, and the run hung). A value
    without an address keeps its references; `$$` and a reference to the uid (known
    only when the pod starts) still expand when the process starts."""
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    env = [
        {"name": "IDX", "valueFrom": {"fieldRef": {"fieldPath": index}}},
        {"name": "POD_IP", "value": "tj-node-0-$(IDX).tj"},
        {"name": "PEER", "value": "tj-node-0-$(IDX):29500"},
        {"name": "RANK", "value": "$(IDX)"},
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "BOTH", "value": "tj-node-0-$(IDX) $(UID) $$(IDX)"},
        {"name": "WHO", "value": "$(TFJOB_POD_NAME)"},  # the local kubelet's, at start
        {"name": "AGAIN", "value": "$(WHO)@tj-node-0-$(IDX)"},
    ]
    container = {"name": "node", "command": ["x"], "env": env}
    job = {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [container]}}}
    jobset = {
        "metadata": {"name": "tj"},
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": job}}]},
    }
    pods = pods_of(jobset, "default")
    for pod in pods:
        got = {e["name"]: e.get("value") for e in pod.manifest["spec"]["containers"][0]["env"]}
        assert got["POD_IP"] == "127.0.0.1"
        assert got["PEER"] == f"127.0.0.1:{pod.port}"
        assert got["RANK"] == "$(IDX)"
        assert got["BOTH"] == "127.0.0.1 $(UID) $$(IDX)"
        assert got["AGAIN"] == "$(WHO)@127.0.0.1"
    container = pods[1].manifest["spec"]["containers"][0]
    started = declared_env(container, {"uid": "u-1"}, {"TFJOB_POD_NAME": "tj-node-0-1"})
    assert started["BOTH"] == "127.0.0.1 u-1 $(IDX)"
    assert started["AGAIN"] == "tj-node-0-1@127.0.0.1"


def test_ctrl_c_stops_every_node_with_exit_130(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    # Each node writes its pid (to a temporary name, then renamed: never read half
    # written) and sleeps.
    code = (
        f"import os, time; p = os.path.join({str(pid_dir)!r}, os.environ['PET_NODE_RANK'])\n"
        "open(p + '.tmp', 'w').write(str(os.getpid())); os.rename(p + '.tmp', p)\n"
        "time.sleep(120)"
    )
    path = write(
        tmp_path / "trainjob.yaml", _trainjob("cc", "torch-distributed", 2, ["python3", "-c", code])
    )
    process = start_tfjob(
        "run", str(path), "--run-dir", str(tmp_path / "run"), "--no-view", "--grace-period", "1"
    )
    try:
        for _ in range(300):
            if len(list(pid_dir.glob("[0-9]"))) == 2:
                break
            time.sleep(0.05)
        pids = [int(p.read_text()) for p in pid_dir.glob("[0-9]")]
        assert len(pids) == 2
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        assert gone_within(pids, 5.0)
    finally:
        process.kill()
        process.wait()
