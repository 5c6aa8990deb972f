"""The JobSet each runtime Trainer v2.3.0 ships makes of a representative TrainJob,
field by field as Trainer's source says it makes it: the env (names, values, order),
pod counts, the rendezvous port, the owner, labels; MPI's Secret and hostfile."""

from __future__ import annotations

import base64
from collections.abc import Callable

import msgspec

from tfjob.api.training_runtime import PodGroupPolicy, TrainingRuntime
from tfjob.core.trainjob.jobset import build, owner_reference
from tfjob.core.trainjob.snapshot import read_snapshot, runtime_yaml

from .conftest import (
    KEYS,
    applied,
    env_map,
    env_names,
    jobset_of,
    node_container,
    plan,
    replicated,
    trainjob,
)

Load = Callable[[str], TrainingRuntime]
INDEX = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
TRAINER = {
    "image": "registry.local/train:1",
    "command": ["python", "train.py"],
    "args": ["--epochs", "2"],
    "numNodes": 3,
    "env": [{"name": "LR", "value": "0.1"}],
}


def test_torch_jobset_is_owned_named_and_unlabelled(shipped: Load) -> None:
    jobset = jobset_of(trainjob(trainer=TRAINER), shipped("torch-distributed"))
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["kind"] == "JobSet"
    assert jobset["metadata"] == {
        "name": "tj",
        "namespace": "ns",
        "ownerReferences": [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "tj",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }  # the TrainJob's own labels and annotations do not propagate
    assert jobset["spec"]["suspend"] is False


def test_torch_node_job_counts_image_and_env(shipped: Load) -> None:
    jobset = jobset_of(trainjob(trainer=TRAINER), shipped("torch-distributed"))
    job = replicated(jobset, "node")
    assert job["replicas"] == 1
    assert job["template"]["spec"]["parallelism"] == 3
    assert job["template"]["spec"]["completions"] == 3
    assert job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    node = node_container(jobset)
    assert node["image"] == "registry.local/train:1"
    assert node["command"] == ["python", "train.py"]
    assert node["args"] == ["--epochs", "2"]
    assert node["env"] == [
        {"name": "LR", "value": "0.1"},  # the user's first, for torch
        {"name": "PET_NNODES", "value": "3"},
        {"name": "PET_NPROC_PER_NODE", "value": "1"},  # no GPU, no CPU request: 1
        {"name": "PET_NODE_RANK", "valueFrom": INDEX},
        {"name": "PET_MASTER_ADDR", "value": "tj-node-0-0.tj"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]
    assert node["ports"] == [{"containerPort": 29500}]


def test_torch_procs_per_node_rules(shipped: Load) -> None:
    rt = shipped("torch-distributed")

    def nproc(**trainer: object) -> str:
        return str(
            env_map(node_container(jobset_of(trainjob(trainer=trainer), rt)))["PET_NPROC_PER_NODE"]
        )

    assert nproc(numProcPerNode=4) == "4"
    assert nproc(resourcesPerNode={"limits": {"nvidia.com/gpu": 2}}) == "auto"
    assert nproc(resourcesPerNode={"requests": {"cpu": "6"}}) == "6"
    assert nproc(resourcesPerNode={"requests": {"cpu": "1500m"}}) == "2"  # rounded up
    assert nproc(resourcesPerNode={"limits": {"cpu": "3"}}) == "3"  # the limit without a request
    assert nproc(numProcPerNode=2, resourcesPerNode={"limits": {"nvidia.com/gpu": 8}}) == "2"


def test_torch_nodes_default_to_the_runtime(shipped: Load) -> None:
    jobset = jobset_of(trainjob(trainer={"image": "x"}), shipped("torch-distributed"))
    assert replicated(jobset, "node")["template"]["spec"]["parallelism"] == 1
    assert env_map(node_container(jobset))["PET_NNODES"] == "1"


def test_torch_without_trainer_still_gets_its_env(shipped: Load) -> None:
    """Deliberate deviation: Trainer v2.3.0 writes no PET_* env and no port without
    spec.trainer, so torchrun has no rendezvous; tfjob writes them."""
    node = node_container(jobset_of(trainjob(), shipped("torch-distributed")))
    assert env_names(node) == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert node["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert node["ports"] == [{"containerPort": 29500}]


def test_jax_env_comes_before_the_users(shipped: Load) -> None:
    jobset = jobset_of(trainjob("jax-distributed", trainer=TRAINER), shipped("jax-distributed"))
    node = node_container(jobset)
    assert node["env"] == [
        {"name": "JAX_NUM_PROCESSES", "value": "3"},
        {"name": "JAX_PROCESS_ID", "valueFrom": INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "tj-node-0-0.tj:29500"},
        {"name": "LR", "value": "0.1"},
    ]
    assert node["ports"] == [{"containerPort": 29500}]
    assert replicated(jobset, "node")["template"]["spec"]["parallelism"] == 3


def test_xgboost_tracker_env_and_workers(shipped: Load) -> None:
    trainer = {**TRAINER, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}
    jobset = jobset_of(
        trainjob("xgboost-distributed", trainer=trainer), shipped("xgboost-distributed")
    )
    node = node_container(jobset)
    assert node["env"] == [
        {"name": "LR", "value": "0.1"},
        {"name": "DMLC_TRACKER_URI", "value": "tj-node-0-0.tj"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": INDEX},
        {"name": "DMLC_NUM_WORKER", "value": "6"},  # 3 nodes x 2 GPUs
    ]
    assert node["resources"] == {"limits": {"nvidia.com/gpu": "2"}}  # as Go writes a Quantity
    assert node["ports"] == [{"containerPort": 29500}]


def _mpi(shipped: Load, name: str) -> tuple[dict, dict, dict]:
    result = plan(trainjob(name, trainer=TRAINER), shipped(name))
    return (
        applied(result, "JobSet"),
        applied(result, "ConfigMap", "tj-mpi-hostfile"),
        applied(result, "Secret"),
    )


def _check_launcher_as_node(shipped: Load, name: str, image: str) -> None:
    jobset, hostfile, secret = _mpi(shipped, name)
    # numNodes 3: the launcher is one node, the node job has the other two.
    assert replicated(jobset, "node")["template"]["spec"]["parallelism"] == 2
    assert replicated(jobset, "launcher")["template"]["spec"]["parallelism"] == 1
    assert replicated(jobset, "launcher")["replicas"] == 1
    launcher = node_container(jobset, "launcher")
    assert launcher["image"] == "registry.local/train:1"
    assert launcher["command"] == ["python", "train.py"]
    assert launcher["env"] == [
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        {"name": "LR", "value": "0.1"},
    ]
    assert launcher["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    node = node_container(jobset, "node")
    assert node["command"] == ["/usr/sbin/sshd"]  # the nodes keep running sshd
    assert node["env"] == [{"name": "LR", "value": "0.1"}]
    assert node["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    # Deliberate deviation: Trainer v2.3.0 leaves the node job on the runtime's
    # image (`image`), so ranks mpirun starts there lack the TrainJob's code.
    assert node["image"] == "registry.local/train:1" != image
    node_pod = replicated(jobset, "node")["template"]["spec"]["template"]["spec"]
    launcher_pod = replicated(jobset, "launcher")["template"]["spec"]["template"]["spec"]
    assert [v["name"] for v in node_pod["volumes"]] == ["mpi-ssh-auth"]
    assert [v["name"] for v in launcher_pod["volumes"]] == ["mpi-ssh-auth", "mpi-hostfile"]
    assert node_pod["volumes"][0]["secret"] == {
        "secretName": "tj-mpi-ssh-auth",
        "defaultMode": 0o400,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
        ],
    }
    assert launcher_pod["volumes"][1]["configMap"] == {
        "name": "tj-mpi-hostfile",
        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
    }
    assert hostfile["data"] == {
        "hostfile": "tj-node-0-0.tj slots=1\ntj-node-0-1.tj slots=1\ntj-launcher-0-0.tj slots=1\n"
    }
    assert hostfile["metadata"]["ownerReferences"] == jobset["metadata"]["ownerReferences"]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-privatekey"]) == KEYS.private_pem
    assert base64.b64decode(secret["data"]["ssh-publickey"]) == KEYS.public_authorized_key
    assert jobset["spec"]["successPolicy"] == {
        "operator": "All",
        "targetReplicatedJobs": ["launcher"],
    }


def test_deepspeed(shipped: Load) -> None:
    _check_launcher_as_node(
        shipped, "deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime"
    )


def test_mlx(shipped: Load) -> None:
    _check_launcher_as_node(shipped, "mlx-distributed", "ghcr.io/kubeflow/trainer/mlx-runtime")


def test_mpi_slots_follow_proc_count_or_gpus(shipped: Load) -> None:
    rt = shipped("deepspeed-distributed")
    gpus = plan(
        trainjob(
            "deepspeed-distributed",
            trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}},
        ),
        rt,
    )
    assert (
        applied(gpus, "ConfigMap", "tj-mpi-hostfile")["data"]["hostfile"]
        == "tj-node-0-0.tj slots=4\ntj-launcher-0-0.tj slots=4\n"
    )
    assert (
        env_map(node_container(applied(gpus, "JobSet"), "launcher"))[
            "OMPI_MCA_orte_set_default_slots"
        ]
        == "4"
    )
    procs = plan(trainjob("deepspeed-distributed", trainer={"numProcPerNode": 3}), rt)
    assert (
        applied(procs, "ConfigMap", "tj-mpi-hostfile")["data"]["hostfile"]
        == "tj-node-0-0.tj slots=3\ntj-launcher-0-0.tj slots=3\n"
    )


def test_mpi_secret_is_made_once(shipped: Load) -> None:
    from tfjob.core.trainjob.plan import CreateObject, Observed

    existing = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tj-mpi-ssh-auth"}}
    result = plan(
        trainjob("deepspeed-distributed", trainer=TRAINER),
        shipped("deepspeed-distributed"),
        Observed(mpi_secret=existing),
    )
    assert not [a for a in result.actions if isinstance(a, CreateObject)]
    first = plan(
        trainjob("deepspeed-distributed", trainer=TRAINER), shipped("deepspeed-distributed")
    )
    assert [a.manifest["kind"] for a in first.actions if isinstance(a, CreateObject)] == ["Secret"]


def test_a_key_pair_is_asked_for_only_while_the_secret_is_to_be_made(shipped: Load) -> None:
    from tfjob.core.trainjob.plan import Observed
    from tfjob.core.trainjob.reconcile import reconcile_trainjob

    from .conftest import NOW

    job, rt = trainjob("deepspeed-distributed", trainer=TRAINER), shipped("deepspeed-distributed")
    asked = reconcile_trainjob(job, rt, Observed(), NOW)
    assert asked.needs_key_pair and asked.actions == [] and not asked.status_changed
    existing = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tj-mpi-ssh-auth"}}
    assert not reconcile_trainjob(job, rt, Observed(mpi_secret=existing), NOW).needs_key_pair
    assert not reconcile_trainjob(
        trainjob(trainer=TRAINER), shipped("torch-distributed"), Observed(), NOW
    ).needs_key_pair


def test_hostfile_applied_only_when_it_differs(shipped: Load) -> None:
    from tfjob.core.trainjob.plan import Observed

    job, rt = trainjob("deepspeed-distributed", trainer=TRAINER), shipped("deepspeed-distributed")
    first = plan(job, rt)
    hostfile = applied(first, "ConfigMap", "tj-mpi-hostfile")
    secret = applied(first, "Secret")
    running = Observed(
        jobset=applied(first, "JobSet"),
        mpi_secret=secret,
        mpi_hostfile=hostfile,
        snapshot=applied(first, "ConfigMap", "tj-runtime-snapshot"),
    )
    assert plan(job, rt, running).actions == []
    stale = Observed(
        jobset=running.jobset,
        mpi_secret=secret,
        snapshot=running.snapshot,
        mpi_hostfile={**hostfile, "data": {"hostfile": "old\n"}},
    )
    assert [a.manifest["metadata"]["name"] for a in plan(job, rt, stale).actions] == [
        "tj-mpi-hostfile"
    ]


def test_a_snapshot_is_parsed_once_and_building_leaves_its_runtime_as_it_was(
    shipped: Load,
) -> None:
    """Every pass of a TrainJob reads its snapshot; one text is parsed once and the
    runtime shared between passes and TrainJobs (snapshot.py), so building a JobSet
    (patches, MPI's Secret and hostfile, a PodGroup) must not change it."""
    for name in ("torch-distributed", "deepspeed-distributed"):
        live = shipped(name)
        job = trainjob(name, trainer=TRAINER)
        text = runtime_yaml(live, "ClusterTrainingRuntime")
        assert runtime_yaml(live, "ClusterTrainingRuntime") is text  # written once
        configmap = {
            "metadata": {"ownerReferences": [owner_reference(job)]},
            "data": {"runtime": text},
        }
        snapped = read_snapshot(job, configmap)
        assert read_snapshot(job, configmap) is snapped  # parsed once
        before = msgspec.json.encode(snapped)
        grouped = msgspec.structs.replace(
            snapped,
            spec=msgspec.structs.replace(
                snapped.spec, pod_group_policy=PodGroupPolicy(coscheduling={})
            ),
        )
        for runtime in (snapped, snapped, grouped):
            build(job, runtime, secret_exists=False, key_pair=KEYS)
        assert msgspec.json.encode(snapped) == before
