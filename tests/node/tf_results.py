"""What the TensorFlow cluster examples (examples/tensorflow/cluster/) must show at
the end, whether they ran as TFJobs (test_tensorflow.py) or as the TrainJobs
`tfjob convert` makes of them (test_trainjob.py): one set of checks for both, on the
`TFJOB_REPORT` each replica printed, by replica."""

from __future__ import annotations

import json
import re
from typing import Any

from lightkube import Client, codecs

from testkit import fast_yaml
from testkit.node import Node
from tests.node.conftest import EXAMPLES

CLUSTER = EXAMPLES / "cluster"


def replica_counts(path: str) -> dict[str, int]:
    """The example's replicas by lower-case type (`chief`, `worker`...), in its order."""
    spec = fast_yaml.load((CLUSTER / path).read_text())["spec"]["tfReplicaSpecs"]
    return {kind.lower(): int(r["replicas"]) for kind, r in spec.items()}


def reports(logs: str) -> dict[str, dict[str, Any]]:
    """`[replica] TFJOB_REPORT {...}` lines of `tfjob logs`, by replica (the last one):
    a TFJob's `worker-1`, a TrainJob's replicated job and index, the same here."""
    found: dict[str, dict[str, Any]] = {}
    for line in logs.splitlines():
        match = re.match(r"\[([a-z]+-\d+)\] TFJOB_REPORT (\{.*\})$", line)
        if match:
            found[match.group(1)] = json.loads(match.group(2))
    return found


def check_multi_worker(found: dict[str, dict[str, Any]], suffix: str) -> None:
    """MultiWorkerMirroredStrategy across pods: every replica's TF_CONFIG (as TensorFlow
    parsed it) lists the same members, each address ending with `suffix`; the same
    global loss everywhere, falling; step 1 is gradient descent on every shard's batch,
    not on the replica's own."""
    first = next(iter(found.values()))
    members = sorted(a for tasks in first["cluster_spec"].values() for a in tasks)
    assert len(members) == len(found)
    assert all(a.endswith(suffix) for a in members), members
    for report in found.values():
        assert report["tfjob_port"] == "2222"
        assert sorted(a for tasks in report["cluster_spec"].values() for a in tasks) == members
        assert report["losses"] == first["losses"]
        assert report["losses"][-1] < report["losses"][0] / 10
        assert report["step1_diff_vs_global_batch"] < 1e-4 < report["step1_diff_vs_own_shard"]


def check_parameter_server(run: dict[str, dict[str, Any]]) -> None:
    """One run of parameter_server.yaml, by its `chief-0` and `evaluator-0` reports:
    variables sharded over both PS, steps run by both workers, and the evaluator scored
    the run's final checkpoint in the run's own folder."""
    chief, evaluator = run["chief-0"], run["evaluator-0"]
    devices = chief["variable_devices"]
    assert all(d.startswith("/job:ps/") for d in devices), devices
    assert {re.search(r"task:(\d+)", d).group(1) for d in devices} == {"0", "1"}  # type: ignore[union-attr]
    assert len(chief["steps_per_pipeline"]) == 2 and chief["all_workers_in_last_round"]
    assert chief["global_step"] >= 400
    assert evaluator["model_dir"] == chief["model_dir"]
    assert chief["final_eval_step"] == chief["global_step"]
    assert chief["final_eval_loss"] == evaluator["losses"][-1]
    assert evaluator["evaluations"][0]["step"] <= chief["global_step"]
    assert chief["checkpoint"].startswith(chief["model_dir"])


def model_volume(node: Node, kube: Client, namespace: str) -> None:
    """The example's ReadWriteMany claim (model-volume.yaml), served on this one node
    by a hostPath volume."""
    folder = node.folder / f"models-{namespace}"  # type: ignore[operator]
    kube.create(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"models-{namespace}"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": namespace, "name": "tfjob-models"},
                    "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
                },
            }
        )
    )
    claim = fast_yaml.load((CLUSTER / "model-volume.yaml").read_text())
    claim["metadata"]["namespace"] = namespace
    kube.create(codecs.from_dict(claim))
