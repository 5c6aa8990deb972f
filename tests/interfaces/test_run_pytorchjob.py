"""`tfjob run` and `tfjob render` of a PyTorchJob, without PyTorch: each replica prints
the env it got, and the tests check it reaches the others on this machine as the
cluster's service names would (tests/pytorch trains with real torch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from testkit import fast_yaml
from testkit.tfjob_cli import tfjob, write

# Prints the PyTorch env as JSON; the Master also serves its MASTER_PORT until each
# Worker has connected to MASTER_ADDR:MASTER_PORT, as torch's TCPStore would.
DUMP = """
import json, os, socket, sys
keys = ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_NODE_RANK", "PET_NNODES",
        "PET_NPROC_PER_NODE", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "TFJOB_PORT"]
env = {k: os.environ.get(k) for k in keys}
print("ENV " + json.dumps(env), flush=True)
if env["MASTER_ADDR"] is None:
    sys.exit(0)
address = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
if env["RANK"] == "0":
    server = socket.create_server(address)
    for _ in range(int(env["WORLD_SIZE"]) - 1):
        server.accept()[0].close()
    print("master: every worker reached me", flush=True)
else:
    for _ in range(200):
        try:
            socket.create_connection(address, timeout=1).close()
            break
        except OSError:
            __import__("time").sleep(0.05)
    else:
        sys.exit(3)
    print("worker: reached the master", flush=True)
"""


def _replica(replicas: int) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "pytorch", "command": [sys.executable, "-c", DUMP]}
    return {
        "replicas": replicas,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container]}},
    }


def _job(name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def _envs(run_dir: Path, pods: list[str]) -> dict[str, dict[str, str]]:
    found = {}
    for pod in pods:
        for line in (run_dir / f"{pod}.log").read_text().splitlines():
            if line.startswith("ENV "):
                found[pod] = json.loads(line[4:])
    return found


def test_master_and_workers_reach_each_other_at_local_addresses(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", _job("pt", {"Master": _replica(1), "Worker": _replica(2)}))
    run_dir = tmp_path / "run"
    result = tfjob("run", str(path), "--run-dir", str(run_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "[master-0] master: every worker reached me" in lines
    envs = _envs(run_dir, ["pt-master-0", "pt-worker-0", "pt-worker-1"])
    master = envs["pt-master-0"]
    for pod, rank in (("pt-master-0", "0"), ("pt-worker-0", "1"), ("pt-worker-1", "2")):
        env = envs[pod]
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", master["TFJOB_PORT"])
        assert (env["RANK"], env["PET_NODE_RANK"], env["WORLD_SIZE"]) == (rank, rank, "3")
        assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == ("3", "auto")
    assert master["MASTER_PORT"] != "23456"  # the port tfjob chose, not the pod's own
    # The Worker pods' init-pytorch (it waits for the Master's DNS name) is not run.
    assert (
        "[tfjob] PyTorchJob Worker pods: the init container init-pytorch a cluster adds "
        "is not run locally (every replica starts at once here)"
    ) in lines
    final = fast_yaml.load((run_dir / "job.yaml").read_text())
    assert final["kind"] == "PyTorchJob"
    assert final["status"]["conditions"][-1]["reason"] == "PyTorchJobSucceeded"


def test_elastic_rendezvous_endpoint_is_worker_0_on_this_machine(tmp_path: Path) -> None:
    elastic = {"rdzvHost": "etcd.example", "rdzvPort": 2379, "minReplicas": 1, "maxReplicas": 3}
    workers = _replica(2)
    # An elastic job succeeds with its first Worker, and the other is then stopped:
    # both wait for each other once their env is printed, so both print it.
    barrier = tmp_path / "arrived"
    barrier.mkdir()
    wait = (
        f"\nimport pathlib, time; d = pathlib.Path({str(barrier)!r}); "
        "(d / str(os.getpid())).touch()\n"
        "while len(list(d.iterdir())) < 2: time.sleep(0.05)\n"
    )
    command = workers["template"]["spec"]["containers"][0]["command"]
    command[-1] = command[-1].replace(
        'print("ENV " + json.dumps(env), flush=True)\n',
        'print("ENV " + json.dumps(env), flush=True)' + wait,
    )
    assert str(barrier) in command[-1]
    doc = _job("el", {"Worker": workers}, elasticPolicy=elastic)
    run_dir = tmp_path / "run"
    result = tfjob("run", str(write(tmp_path / "job.yaml", doc)), "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    envs = _envs(run_dir, ["el-worker-0", "el-worker-1"])
    port = envs["el-worker-0"]["TFJOB_PORT"]
    for env in envs.values():
        assert env["PET_RDZV_ENDPOINT"] == f"127.0.0.1:{port}"
        assert (env["PET_RDZV_BACKEND"], env["PET_NNODES"]) == ("c10d", "1:3")
        assert env["MASTER_ADDR"] is None and env["RANK"] is None  # torchrun sets them
    assert "init container" not in result.stdout  # no Master: no init-pytorch


def test_the_kinds_variables_are_not_inherited_from_tfjobs_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Worker-only job gets no MASTER_ADDR or RANK on a cluster: one left in the
    shell (say, by a launcher tfjob runs under) must not reach the replicas either."""
    for name, value in (("RANK", "7"), ("MASTER_ADDR", "elsewhere"), ("PET_RDZV_ID", "x")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KEPT_FROM_SHELL", "yes")
    code = "import os; print('SEEN', [os.environ.get(k) for k in ('RANK', 'MASTER_ADDR', 'PET_RDZV_ID', 'KEPT_FROM_SHELL')])"
    worker = _replica(1)
    worker["template"]["spec"]["containers"][0]["command"] = [sys.executable, "-c", code]
    doc = _job("plain", {"Worker": worker})
    result = tfjob(
        "run", str(write(tmp_path / "job.yaml", doc)), "--run-dir", str(tmp_path / "run")
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[worker-0] SEEN [None, None, None, 'yes']" in result.stdout.splitlines()


def test_a_failing_worker_fails_the_pytorchjob(tmp_path: Path) -> None:
    failing = _replica(1)
    failing["template"]["spec"]["containers"][0]["command"] = [
        sys.executable,
        "-c",
        "raise SystemExit(4)",
    ]
    doc = _job("bad", {"Worker": failing})
    result = tfjob(
        "run", str(write(tmp_path / "job.yaml", doc)), "--run-dir", str(tmp_path / "run")
    )
    assert result.returncode == 1
    assert "PyTorchJob bad is failed because 1 Worker replica(s) failed." in result.stderr


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
            "spec.pytorchReplicaSpecs[Master].replicas: must be 1, got 2",
        ),
        (
            lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][
                0
            ].update(name="trainer"),
            "must have at least one container with name pytorch",
        ),
        (
            lambda d: d["spec"].update(nprocPerNode="many"),
            "spec.nprocPerNode: must be auto, cpu, gpu or a number of processes, got 'many'",
        ),
        (
            lambda d: d["spec"]["pytorchReplicaSpecs"].update(PS=_replica(1)),
            "spec.pytorchReplicaSpecs[PS]: unsupported replica type 'PS'",
        ),
        (
            lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][
                0
            ].update(command=["no-such-tool-tfjob"]),
            'spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].command[0]: "no-such-tool-tfjob" is not an executable on PATH',
        ),
    ],
    ids=[
        "two masters",
        "no pytorch container",
        "bad nprocPerNode",
        "unknown type",
        "command not on PATH",
    ],
)
def test_a_bad_pytorchjob_is_refused_naming_field_and_fix(
    tmp_path: Path, change: Any, expected: str
) -> None:
    doc = _job("bad", {"Master": _replica(1), "Worker": _replica(1)})
    change(doc)
    run_dir = tmp_path / "run"
    result = tfjob("run", str(write(tmp_path / "job.yaml", doc)), "--run-dir", str(run_dir))
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert "fix:" in result.stderr
    assert not run_dir.exists()


def test_render_prints_the_pods_and_services_a_cluster_gets(tmp_path: Path) -> None:
    doc = _job("pytorch-ddp", {"Master": _replica(1), "Worker": _replica(2)})
    result = tfjob("render", str(write(tmp_path / "job.yaml", doc)))
    assert result.returncode == 0, result.stderr
    docs = list(fast_yaml.load_all(result.stdout))
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    pods = ["pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"]
    assert names == [("Pod", n) for n in pods] + [("Service", n) for n in pods]
    worker = docs[2]["spec"]
    env = {e["name"]: e["value"] for e in worker["containers"][0]["env"]}
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("pytorch-ddp-master-0", "23456")
    assert (env["RANK"], env["WORLD_SIZE"]) == ("2", "3")
    assert [c["name"] for c in worker["initContainers"]] == ["init-pytorch"]
    assert "nslookup pytorch-ddp-master-0" in worker["initContainers"][0]["command"][2]
    assert docs[3]["spec"]["clusterIP"] == "None"
    assert docs[0]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
