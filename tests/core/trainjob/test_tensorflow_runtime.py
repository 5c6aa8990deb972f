"""The JobSet the tensorflow-distributed runtime makes of a TrainJob: every pod's
TF_CONFIG, once Kubernetes expands `$(TFJOB_POD_INDEX)` with the pod's completion
index, is byte for byte the TF_CONFIG the equivalent TFJob's pod gets, with the
JobSet's host names (`<tj>-<job>-0-<index>.<tj>`) for the TFJob's service names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from testkit import fast_yaml
from tfjob.api import schema_rules
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.core.trainjob.plan import Observed
from tfjob.frameworks import tensorflow as tf
from tfjob.frameworks.mlpolicy.base import COMPLETION_INDEX_PATH
from tfjob.frameworks.settings import Settings

from .conftest import (
    REPO,
    applied,
    env_map,
    jobset_of,
    node_container,
    plan,
    replicated,
    runtime,
    trainjob,
)

RUNTIMES = REPO / "manifests/overlays/tfjob-runtimes"
TRAINER = {"image": "registry.local/tf:1", "command": ["python3", "ps.py"], "numNodes": 2}
#: TFJob replica type -> the runtime's replicated job.
JOBS = {"chief": "chief", "ps": "ps", "worker": "node", "evaluator": "evaluator"}


def load(path: Path) -> TrainingRuntime:
    return decode_runtime(fast_yaml.load(path.read_text()))


def pods(jobset: dict[str, Any], job: str) -> int:
    return int(replicated(jobset, job)["template"]["spec"]["parallelism"])


def expand(container: dict[str, Any], index: int) -> dict[str, str]:
    """The container's env as the kubelet gives it to a pod of this completion index:
    the index read through the downward API, `$(NAME)` of an earlier variable expanded."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        source = var.get("valueFrom")
        if source is not None:
            assert source == {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}
            env[var["name"]] = str(index)
            continue
        env[var["name"]] = re.sub(
            r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
            lambda m: env.get(m.group(1), m.group(0)),
            var["value"],
        )
    return env


def tfjob_config(rtype: str, index: int) -> str:
    """What examples/tensorflow/parameter_server.yaml's pod gets, named `tj` in `ns`,
    its addresses turned into the JobSet's host names."""
    document = fast_yaml.load((REPO / "examples/tensorflow/parameter_server.yaml").read_text())
    document["metadata"] = {"name": "tj", "namespace": "ns"}
    job = msgspec.convert(document, tf.TFJob, strict=False)
    value = tf.tf_config(job, rtype, index, Settings())
    assert value is not None
    return re.sub(
        r"tj-(chief|ps|worker|evaluator)-(\d+)\.ns\.svc:",
        lambda m: f"tj-{JOBS[m.group(1)]}-0-{m.group(2)}.tj:",
        value,
    )


def test_the_runtime_is_valid_under_trainers_crd() -> None:
    document = fast_yaml.load((RUNTIMES / "tensorflow-distributed.yaml").read_text())
    assert schema_rules.check(document, schema_rules.CLUSTERTRAININGRUNTIME_SCHEMA) == []
    assert document["spec"]["mlPolicy"] == {"numNodes": 2}  # no source: Trainer's schema
    labels = document["metadata"]["labels"]
    assert labels == {"trainer.kubeflow.org/framework": "tensorflow"}


def test_every_pod_gets_the_tfjobs_tf_config_with_jobset_hosts() -> None:
    jobset = jobset_of(
        trainjob("tensorflow-distributed", trainer=TRAINER),
        load(RUNTIMES / "tensorflow-distributed.yaml"),
    )
    seen = 0
    for rtype, job in JOBS.items():
        container = node_container(jobset, job)
        assert replicated(jobset, job).get("replicas", 1) == 1
        for index in range(pods(jobset, job)):
            assert expand(container, index)["TF_CONFIG"] == tfjob_config(rtype, index)
            seen += 1
    assert seen == 6  # chief 1, ps 2, workers 2 (numNodes), evaluator 1


def test_one_workers_tf_config_in_full() -> None:
    jobset = jobset_of(
        trainjob("tensorflow-distributed", trainer=TRAINER),
        load(RUNTIMES / "tensorflow-distributed.yaml"),
    )
    assert expand(node_container(jobset, "node"), 1)["TF_CONFIG"] == (
        '{"cluster":{"chief":["tj-chief-0-0.tj:2222"],"evaluator":["tj-evaluator-0-0.tj:2222"],'
        '"ps":["tj-ps-0-0.tj:2222","tj-ps-0-1.tj:2222"],'
        '"worker":["tj-node-0-0.tj:2222","tj-node-0-1.tj:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_every_task_runs_the_trainjobs_program_and_listens() -> None:
    jobset = jobset_of(
        trainjob(
            "tensorflow-distributed", trainer={**TRAINER, "env": [{"name": "LR", "value": "1"}]}
        ),
        load(RUNTIMES / "tensorflow-distributed.yaml"),
    )
    for job in JOBS.values():
        container = node_container(jobset, job)
        assert container["image"] == "registry.local/tf:1"
        assert container["command"] == ["python3", "ps.py"]
        assert env_map(container)["LR"] == "1"
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]


def test_the_jobset_completes_with_its_chief() -> None:
    """As a TFJob with a chief succeeds when its chief does (PS and workers serve until
    stopped), the JobSet completes when the chief's Job does; JobSet then deletes the
    Jobs still running."""
    jobset = jobset_of(
        trainjob("tensorflow-distributed", trainer=TRAINER),
        load(RUNTIMES / "tensorflow-distributed.yaml"),
    )
    assert jobset["spec"]["successPolicy"] == {"operator": "Any", "targetReplicatedJobs": ["chief"]}


def workers_only(port: dict[str, Any] | None = None) -> TrainingRuntime:
    container: dict[str, Any] = {"name": "node", "image": "tensorflow/tensorflow:2.16.1"}
    if port is not None:
        container["ports"] = [port]
    rt = runtime(
        {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": {"spec": {"containers": [container]}}},
                            },
                        }
                    ]
                }
            },
        },
        name="tf-workers",
    )
    rt.metadata.labels["trainer.kubeflow.org/framework"] = "tensorflow"
    return rt


def test_a_single_worker_gets_no_tf_config_as_a_one_replica_tfjob() -> None:
    jobset = jobset_of(trainjob("tf-workers", trainer={"numNodes": 1}), workers_only())
    assert "TF_CONFIG" not in env_map(node_container(jobset))


def test_workers_only_runtime_honours_its_tfjob_port() -> None:
    port = {"name": "tfjob-port", "containerPort": 3333}
    jobset = jobset_of(trainjob("tf-workers", trainer={"numNodes": 3}), workers_only(port))
    config = expand(node_container(jobset), 2)["TF_CONFIG"]
    assert config == (
        '{"cluster":{"worker":["tj-node-0-0.tj:3333","tj-node-0-1.tj:3333",'
        '"tj-node-0-2.tj:3333"]},"task":{"type":"worker","index":2},"environment":"cloud"}'
    )


def test_without_the_framework_label_the_runtime_is_plain() -> None:
    rt = workers_only()
    rt.metadata.labels.clear()
    jobset = jobset_of(trainjob("tf-workers", trainer={"numNodes": 2}), rt)
    assert "TF_CONFIG" not in env_map(node_container(jobset))


def test_a_task_job_of_several_replicas_fails_the_trainjob() -> None:
    """A pod knows only its completion index, so a chief, PS or evaluator job must be
    one Job of `parallelism` pods."""
    rt = load(RUNTIMES / "tensorflow-distributed.yaml")
    replicated({"spec": rt.spec.template["spec"]}, "ps")["replicas"] = 2
    result = plan(trainjob("tensorflow-distributed", trainer=TRAINER), rt)
    assert [(c.type, c.status, c.reason, c.message) for c in result.status.conditions] == [
        (
            "Failed",
            "True",
            "InvalidTrainingRuntime",
            "tensorflow runtime: replicatedJobs ps has replicas 2; a TF task job needs "
            "replicas 1 (set its parallelism instead)",
        )
    ]


def test_the_runtime_snapshot_keeps_it_tensorflow() -> None:
    """Later passes build from the snapshot (the runtime may be gone): its label too."""
    job = trainjob("tensorflow-distributed", trainer=TRAINER)
    snapshot = applied(plan(job, load(RUNTIMES / "tensorflow-distributed.yaml")), "ConfigMap")
    jobset = applied(plan(job, None, Observed(snapshot=snapshot)), "JobSet")
    assert expand(node_container(jobset, "node"), 1)["TF_CONFIG"] == tfjob_config("worker", 1)
