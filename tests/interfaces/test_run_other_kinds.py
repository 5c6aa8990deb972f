"""`tfjob run` and `tfjob render` of a JAXJob, an XGBoostJob and a PaddleJob, without
their frameworks: each replica prints the env it got and reaches the replica the
env names (the coordinator, tracker or rendezvous), listening there as the
framework would (tests/jax and tests/xgboost train with the real ones)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import fast_yaml
from testkit.tfjob_cli import tfjob, write

# ENV {json} of the kind's variables; then the replica that hosts the rendezvous
# (its address's port is its own TFJOB_PORT) accepts one connection from every
# other replica, and the others connect to it.
DUMP = """
import json, os, socket, sys, time
keys = sys.argv[1].split(",")
env = {k: os.environ.get(k) for k in keys + ["TFJOB_PORT"]}
print("ENV " + json.dumps(env), flush=True)
host, port, peers = sys.argv[2:5]
host, port = os.environ[host], int(os.environ[port]) if port.isupper() else int(port)
if ":" in host:
    host, port = host.split(":")[0], int(host.split(":")[1])
if port == int(env["TFJOB_PORT"]):
    server = socket.create_server(("127.0.0.1", port))
    for _ in range(int(peers)):
        server.accept()[0].close()
    print("host: every replica reached me", flush=True)
else:
    for _ in range(200):
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(3)
    print("reached the host", flush=True)
"""

# kind -> (variables, host variable, port variable or "-", replica types and counts)
KINDS: dict[str, tuple[list[str], str, str, dict[str, int]]] = {
    "JAXJob": (
        ["COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"],
        "COORDINATOR_ADDRESS",
        "COORDINATOR_PORT",
        {"Worker": 3},
    ),
    "XGBoostJob": (
        ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "WORKER_ADDRS", "WORKER_PORT"],
        "MASTER_ADDR",
        "MASTER_PORT",
        {"Master": 1, "Worker": 2},
    ),
    "PaddleJob": (
        ["PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID", "PADDLE_TRAINER_NUM", "POD_IP_DUMMY"],
        "PADDLE_MASTER",
        "0",
        {"Worker": 3},
    ),
}
CONTAINERS = {"JAXJob": "jax", "XGBoostJob": "xgboost", "PaddleJob": "paddle"}
FIELDS = {
    "JAXJob": "jaxReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
}


def _job(kind: str, name: str, types: dict[str, int] | None = None) -> dict[str, Any]:
    keys, host, port, default_types = KINDS[kind]
    counts = types or default_types
    peers = str(sum(counts.values()) - 1)
    command = [sys.executable, "-c", DUMP, ",".join(keys), host, port, peers]
    container = {"name": CONTAINERS[kind], "image": "unused", "command": command}
    specs = {
        rtype: {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }
        for rtype, count in counts.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {FIELDS[kind]: specs},
    }


def _envs(run_dir: Path, pods: list[str]) -> dict[str, dict[str, str]]:
    found = {}
    for pod in pods:
        for line in (run_dir / f"{pod}.log").read_text().splitlines():
            if line.startswith("ENV "):
                found[pod] = json.loads(line[4:])
    return found


def _run(tmp_path: Path, document: dict[str, Any]) -> tuple[Path, Any]:
    run_dir = tmp_path / "run"
    result = tfjob("run", str(write(tmp_path / "job.yaml", document)), "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert final["status"]["conditions"][-1]["reason"] == f"{document['kind']}Succeeded"
    return run_dir, result


def test_jax_processes_meet_at_process_0s_coordinator(tmp_path: Path) -> None:
    run_dir, result = _run(tmp_path, _job("JAXJob", "jx"))
    assert "[worker-0] host: every replica reached me" in result.stdout.splitlines()
    envs = _envs(run_dir, [f"jx-worker-{i}" for i in range(3)])
    coordinator = envs["jx-worker-0"]["TFJOB_PORT"]
    for index, env in enumerate(envs[f"jx-worker-{i}"] for i in range(3)):
        assert (env["COORDINATOR_ADDRESS"], env["COORDINATOR_PORT"]) == ("127.0.0.1", coordinator)
        assert (env["NUM_PROCESSES"], env["PROCESS_ID"]) == ("3", str(index))


def test_xgboost_workers_reach_the_master_and_know_each_other(tmp_path: Path) -> None:
    run_dir, result = _run(tmp_path, _job("XGBoostJob", "xg"))
    assert "[master-0] host: every replica reached me" in result.stdout.splitlines()
    pods = ["xg-master-0", "xg-worker-0", "xg-worker-1"]
    envs = _envs(run_dir, pods)
    master = envs["xg-master-0"]["TFJOB_PORT"]
    workers = [f"127.0.0.1:{envs[p]['TFJOB_PORT']}" for p in pods[1:]]
    for rank, pod in enumerate(pods):
        env = envs[pod]
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", master)
        assert (env["WORLD_SIZE"], env["RANK"]) == ("3", str(rank))
        assert env["WORKER_ADDRS"] == ",".join(workers)


@pytest.mark.parametrize("mode", ["collective", "parameter-server"])
def test_paddle_replicas_reach_the_rendezvous(tmp_path: Path, mode: str) -> None:
    types = {"Worker": 3} if mode == "collective" else {"Master": 1, "Worker": 2}
    run_dir, result = _run(tmp_path, _job("PaddleJob", "pd", types))
    first = "worker-0" if mode == "collective" else "master-0"
    assert f"[{first}] host: every replica reached me" in result.stdout.splitlines()
    pods = [f"pd-{t.lower()}-{i}" for t, n in types.items() for i in range(n)]
    envs = _envs(run_dir, pods)
    port = envs[f"pd-{first}"]["TFJOB_PORT"]
    for pod in pods:
        assert envs[pod]["PADDLE_MASTER"] == f"127.0.0.1:{port}"
        assert (envs[pod]["PADDLE_NNODES"], envs[pod]["PADDLE_JOB_ID"]) == ("3", "pd")
    # The rendezvous pod's own address comes from status.podIP, as on a cluster.
    assert envs[f"pd-{first}"]["POD_IP_DUMMY"] == "127.0.0.1"


def test_render_prints_the_env_a_cluster_gives(tmp_path: Path) -> None:
    result = tfjob("render", str(write(tmp_path / "job.yaml", _job("XGBoostJob", "xgb"))))
    assert result.returncode == 0, result.stderr
    docs = list(fast_yaml.load_all(result.stdout))
    worker = next(d for d in docs if d["metadata"]["name"] == "xgb-worker-1")
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"]) == ("xgb-master-0", "9999", "2")
    assert (env["WORKER_ADDRS"], env["WORKER_PORT"]) == ("xgb-worker-0,xgb-worker-1", "9999")


@pytest.mark.parametrize(
    ("kind", "change", "expected"),
    [
        (
            "JAXJob",
            lambda d: d["spec"]["jaxReplicaSpecs"].update(
                Master=d["spec"]["jaxReplicaSpecs"]["Worker"]
            ),
            "spec.jaxReplicaSpecs[Master]: unsupported replica type 'Master'",
        ),
        (
            "XGBoostJob",
            lambda d: d["spec"]["xgbReplicaSpecs"].pop("Master"),
            "spec.xgbReplicaSpecs[Master]: must be present",
        ),
        (
            "PaddleJob",
            lambda d: d["spec"].update(elasticPolicy={"minReplicas": 3, "maxReplicas": 2}),
            "spec.elasticPolicy.minReplicas: must not exceed maxReplicas, got 3 > 2",
        ),
    ],
    ids=["jax master", "xgboost without master", "paddle min above max"],
)
def test_a_bad_job_is_refused_naming_field_and_fix(
    tmp_path: Path, kind: str, change: Any, expected: str
) -> None:
    document = _job(kind, "bad")
    change(document)
    run_dir = tmp_path / "run"
    result = tfjob("run", str(write(tmp_path / "job.yaml", document)), "--run-dir", str(run_dir))
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and "fix:" in result.stderr
    assert not run_dir.exists()


def test_replicas_past_64_bits_is_a_field_error_not_a_traceback(tmp_path: Path) -> None:
    text = yaml.safe_dump(_job("JAXJob", "huge")).replace("replicas: 3", "replicas: " + "9" * 26)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    result = tfjob("run", str(path), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "spec.jaxReplicaSpecs[Worker].replicas: must be an integer, got 1e+26" in result.stderr


def test_a_key_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    text = yaml.safe_dump(_job("PaddleJob", "first"), sort_keys=False)
    text = text.replace("  name: first\n", "  name: first\n  name: second\n")
    path = tmp_path / "job.yaml"
    path.write_text(text)
    for command in ("run", "render"):
        result = tfjob(command, str(path))
        assert result.returncode == 2, result.stdout + result.stderr
        assert 'line 5: key "name" already set in map (first at line 4)' in result.stderr
        assert "invalid PaddleJob" in result.stderr
