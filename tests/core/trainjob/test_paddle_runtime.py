"""The JobSet the paddle-distributed runtime makes of a TrainJob: every pod's PADDLE_*
env is the equivalent PaddleJob's, at the JobSet's host names; each pod's POD_IP
(Paddle's launcher's own address) expands to its own host name, so the first worker,
and only it, finds itself at PADDLE_MASTER's host and starts the rendezvous."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from testkit import fast_yaml
from tfjob.api import schema_rules
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.frameworks import paddle as pd
from tfjob.frameworks.settings import Settings

from .conftest import REPO, jobset_of, node_container, replicated, trainjob
from .test_tensorflow_runtime import expand

RUNTIMES = REPO / "manifests/overlays/tfjob-runtimes"
TRAINER = {"image": "registry.local/paddle:1", "command": ["python3", "train.py"], "numNodes": 3}
PADDLE_NAMES = ("PYTHONUNBUFFERED", "PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER")


def load(path: Path) -> TrainingRuntime:
    return decode_runtime(fast_yaml.load(path.read_text()))


def paddlejob_env(workers: int, index: int, masters: int = 0) -> dict[str, str]:
    """What a PaddleJob `tj` pod gets (Worker `index`), its service names turned into
    the JobSet's host names."""
    document = fast_yaml.load((REPO / "examples/paddle/job.yaml").read_text())
    document["metadata"] = {"name": "tj", "namespace": "ns"}
    specs = document["spec"]["paddleReplicaSpecs"]
    specs["Worker"]["replicas"] = workers
    if masters:
        specs["Master"] = {**specs["Worker"], "replicas": masters}
    job = msgspec.convert(document, pd.PaddleJob, strict=False)
    env = pd.PADDLE.pod_env(job, Settings()).for_replica(pd.WORKER, index)
    hosts = {"tj-worker-0": "tj-node-0-0.tj", "tj-master-0": "tj-master-0-0.tj"}
    out = {}
    for var in env:
        value = var.get("value", "")
        for service, host in hosts.items():
            value = value.replace(f"{service}:", f"{host}:")
        out[var["name"]] = value
    return out


def test_the_runtime_is_valid_under_trainers_crd() -> None:
    document = fast_yaml.load((RUNTIMES / "paddle-distributed.yaml").read_text())
    assert schema_rules.check(document, schema_rules.CLUSTERTRAININGRUNTIME_SCHEMA) == []
    assert document["spec"]["mlPolicy"] == {"numNodes": 2}  # no source: Trainer's schema
    assert document["metadata"]["labels"] == {"trainer.kubeflow.org/framework": "paddle"}


def test_every_worker_gets_the_paddlejobs_env_and_its_own_host() -> None:
    jobset = jobset_of(
        trainjob("paddle-distributed", trainer=TRAINER), load(RUNTIMES / "paddle-distributed.yaml")
    )
    container = node_container(jobset)
    assert container["image"] == "registry.local/paddle:1"
    assert container["ports"] == [{"name": "master", "containerPort": 36543}]
    for index in range(3):
        env = expand(container, index)
        assert {k: env[k] for k in PADDLE_NAMES} == {
            "PYTHONUNBUFFERED": "1",
            "PADDLE_JOB_ID": "tj",
            "PADDLE_NNODES": "3",
            "PADDLE_MASTER": "tj-node-0-0.tj:36543",
        }
        if index > 0:  # a PaddleJob's non-rendezvous Worker: the same env
            assert {k: env[k] for k in PADDLE_NAMES} == paddlejob_env(3, index)
        assert env["POD_IP"] == f"tj-node-0-{index}.tj"
    # Only the first worker's own address is the master's host (Paddle starts it there).
    own = [expand(container, i)["POD_IP"] for i in range(3)]
    assert [f"{h}:36543" == "tj-node-0-0.tj:36543" for h in own] == [True, False, False]


def test_every_container_of_the_pod_gets_the_env() -> None:
    rt = load(RUNTIMES / "paddle-distributed.yaml")
    pod = replicated({"spec": rt.spec.template["spec"]}, "node")["template"]["spec"]["template"]
    pod["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    jobset = jobset_of(trainjob("paddle-distributed", trainer=TRAINER), rt)
    spec = replicated(jobset, "node")["template"]["spec"]["template"]["spec"]
    sidecar = next(c for c in spec["containers"] if c["name"] == "sidecar")
    assert expand(sidecar, 1)["PADDLE_MASTER"] == "tj-node-0-0.tj:36543"
    assert expand(sidecar, 1)["PADDLE_NNODES"] == "3"


def test_a_master_job_is_parameter_server_mode() -> None:
    rt = load(RUNTIMES / "paddle-distributed.yaml")
    jobs: list[dict[str, Any]] = rt.spec.template["spec"]["replicatedJobs"]
    master = fast_yaml.load(yaml.safe_dump(jobs[0]))
    master["name"] = "master"
    del master["template"]["metadata"]
    master["template"]["spec"]["parallelism"] = 1
    jobs.insert(0, master)
    jobset = jobset_of(trainjob("paddle-distributed", trainer={"numNodes": 2}), rt)
    worker = expand(node_container(jobset), 1)
    assert {k: worker[k] for k in (*PADDLE_NAMES, "PADDLE_TRAINER_NUM")} == paddlejob_env(
        2, 1, masters=1
    )
    assert worker["PADDLE_MASTER"] == "tj-master-0-0.tj:36543"
    server = expand(node_container(jobset, "master"), 0)
    assert server["PADDLE_SERVER_NUM"] == "1" and "PADDLE_TRAINER_NUM" not in server
    assert server["POD_IP"] == "tj-master-0-0.tj"
