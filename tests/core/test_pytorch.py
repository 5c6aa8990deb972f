"""PyTorchJob's pods, services and status, as Kubeflow v1.9.4 makes them.

The expected env lists are written out in full, in upstream's order (envvar.go
setPodEnv, master.go, elastic.go), so a reordering or a changed value fails.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from tfjob.api.observed import (
    ContainerState,
    ContainerStatus,
    Meta,
    OwnerReference,
    Pod,
    PodStatus,
    Terminated,
)
from tfjob.core.objects import desired_objects, desired_pod, desired_service
from tfjob.core.plan import CreatePod, DeletePod, Plan
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.pytorch import PyTorchJob
from tfjob.frameworks.registry import with_defaults

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
UID = "uid-pt"


def replica(replicas: int = 1, restart: str = "", port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "pytorch", "image": "torch:1"}
    if port is not None:
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    out: dict[str, Any] = {"replicas": replicas, "template": {"spec": {"containers": [container]}}}
    if restart:
        out["restartPolicy"] = restart
    return out


def pt_job(
    *,
    nproc: str | None = None,
    elastic: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **specs: dict[str, Any],
) -> PyTorchJob:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    doc: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ns", "uid": UID},
        "spec": spec,
    }
    if status is not None:
        doc["status"] = status
    return msgspec.convert(doc, PyTorchJob)


def env_of(job: PyTorchJob, rtype: str, index: int, container: int = 0) -> list[str]:
    pod = desired_pod(job, rtype, index, Settings())
    return [f"{v['name']}={v['value']}" for v in pod["spec"]["containers"][container]["env"]]


MASTER_ENV = [
    "MASTER_PORT=23456",
    "PET_MASTER_PORT=23456",
    "MASTER_ADDR=pt-master-0",
    "PET_MASTER_ADDR=pt-master-0",
]


@pytest.mark.parametrize(
    ("job", "rtype", "index", "expected"),
    [
        pytest.param(
            pt_job(Master=replica(), Worker=replica(2)),
            "Master",
            0,
            [
                "PYTHONUNBUFFERED=1",
                *MASTER_ENV,
                "WORLD_SIZE=3",
                "RANK=0",
                "PET_NODE_RANK=0",
                "PET_NPROC_PER_NODE=auto",
                "PET_NNODES=3",
            ],
            id="master-of-master-and-workers",
        ),
        pytest.param(
            pt_job(Master=replica(), Worker=replica(2)),
            "Worker",
            1,
            [
                "PYTHONUNBUFFERED=1",
                *MASTER_ENV,
                "WORLD_SIZE=3",
                "RANK=2",
                "PET_NODE_RANK=2",
                "PET_NPROC_PER_NODE=auto",
                "PET_NNODES=3",
            ],
            id="worker-rank-is-index-plus-one",
        ),
        pytest.param(
            pt_job(Worker=replica(3)),
            "Worker",
            0,
            ["PYTHONUNBUFFERED=1", "PET_NPROC_PER_NODE=auto", "PET_NNODES=3"],
            id="workers-only-no-master-addr-rank-or-world-size",
        ),
        pytest.param(
            pt_job(nproc="4", Master=replica(), Worker=replica(2)),
            "Worker",
            0,
            [
                "PYTHONUNBUFFERED=1",
                *MASTER_ENV,
                "WORLD_SIZE=12",
                "RANK=1",
                "PET_NODE_RANK=1",
                "PET_NPROC_PER_NODE=4",
                "PET_NNODES=3",
            ],
            id="nproc-int-multiplies-world-size",
        ),
        *(
            pytest.param(
                pt_job(nproc=word, Master=replica(), Worker=replica(1)),
                "Master",
                0,
                [
                    "PYTHONUNBUFFERED=1",
                    *MASTER_ENV,
                    "WORLD_SIZE=2",
                    "RANK=0",
                    "PET_NODE_RANK=0",
                    f"PET_NPROC_PER_NODE={word}",
                    "PET_NNODES=2",
                ],
                id=f"nproc-{word}-counts-one",
            )
            for word in ("auto", "cpu", "gpu")
        ),
        pytest.param(
            pt_job(Master=replica(port=29500), Worker=replica(1, port=29501)),
            "Worker",
            0,
            [
                "PYTHONUNBUFFERED=1",
                "MASTER_PORT=29500",
                "PET_MASTER_PORT=29500",
                "MASTER_ADDR=pt-master-0",
                "PET_MASTER_ADDR=pt-master-0",
                "WORLD_SIZE=2",
                "RANK=1",
                "PET_NODE_RANK=1",
                "PET_NPROC_PER_NODE=auto",
                "PET_NNODES=2",
            ],
            id="custom-port-is-the-masters",
        ),
        pytest.param(
            pt_job(elastic={}, Worker=replica(2)),
            "Worker",
            1,
            [
                "PYTHONUNBUFFERED=1",
                "PET_NPROC_PER_NODE=auto",
                "PET_RDZV_ENDPOINT=pt-worker-0:23456",
                "PET_RDZV_BACKEND=c10d",
                "PET_NNODES=2:2",
            ],
            id="elastic-defaults",
        ),
        pytest.param(
            pt_job(
                elastic={
                    "minReplicas": 1,
                    "maxReplicas": 4,
                    "rdzvBackend": "etcd-v2",
                    "rdzvHost": "etcd.infra",
                    "rdzvPort": 2379,
                    "rdzvId": "run-7",
                    "rdzvConf": [{"key": "timeout", "value": "60"}, {"key": "a", "value": "b"}],
                    "standalone": True,
                    "maxRestarts": 3,
                },
                nproc="2",
                Worker=replica(2, port=29400),
            ),
            "Worker",
            0,
            [
                "PYTHONUNBUFFERED=1",
                "PET_NPROC_PER_NODE=2",
                "PET_RDZV_ENDPOINT=etcd.infra:2379",
                "PET_RDZV_BACKEND=etcd-v2",
                "PET_NNODES=1:4",
                "PET_MAX_RESTARTS=3",
                "PET_RDZV_ID=run-7",
                "PET_RDZV_CONF=timeout=60,a=b",
                "PET_STANDALONE=",
            ],
            id="elastic-every-field",
        ),
        pytest.param(
            pt_job(elastic={"maxReplicas": 5, "standalone": False}, Worker=replica(2, port=29400)),
            "Worker",
            0,
            [
                "PYTHONUNBUFFERED=1",
                "PET_NPROC_PER_NODE=auto",
                "PET_RDZV_ENDPOINT=pt-worker-0:29400",
                "PET_RDZV_BACKEND=c10d",
                "PET_NNODES=5:5",
            ],
            id="elastic-rdzv-port-is-the-workers-standalone-false-absent",
        ),
        pytest.param(
            pt_job(elastic={"nProcPerNode": 8, "minReplicas": 2}, Worker=replica(3)),
            "Worker",
            2,
            [
                "PYTHONUNBUFFERED=1",
                "PET_RDZV_ENDPOINT=pt-worker-0:23456",
                "PET_RDZV_BACKEND=c10d",
                "PET_NNODES=2:2",
                "PET_NPROC_PER_NODE=8",
            ],
            id="elastic-deprecated-nproc-in-the-elastic-env-only",
        ),
        pytest.param(  # as Kubeflow v1.9.4's operator creates it, order included
            pt_job(
                elastic={
                    "maxReplicas": 3,
                    "maxRestarts": 1,
                    "nProcPerNode": 4,
                    "rdzvId": "np",
                    "rdzvHost": "rdzv.example",
                    "rdzvPort": 29400,
                    "standalone": True,
                },
                Master=replica(),
                Worker=replica(2),
            ),
            "Worker",
            1,
            [
                "PYTHONUNBUFFERED=1",
                *MASTER_ENV,
                "WORLD_SIZE=3",  # nprocPerNode unset: one per replica
                "RANK=2",
                "PET_NODE_RANK=2",
                "PET_RDZV_ENDPOINT=rdzv.example:29400",
                "PET_RDZV_BACKEND=c10d",
                "PET_NNODES=3:3",
                "PET_MAX_RESTARTS=1",
                "PET_NPROC_PER_NODE=4",
                "PET_RDZV_ID=np",
                "PET_STANDALONE=",
            ],
            id="elastic-deprecated-nproc-after-max-restarts-with-a-master",
        ),
    ],
)
def test_env_in_upstreams_order(
    job: PyTorchJob, rtype: str, index: int, expected: list[str]
) -> None:
    assert env_of(job, rtype, index) == expected


def test_env_goes_to_every_container_after_the_users_own() -> None:
    job = pt_job(Worker=replica(2))
    spec = job.spec.pytorch_replica_specs["Worker"].template["spec"]
    spec["containers"][0]["env"] = [{"name": "MINE", "value": "1"}]
    spec["containers"].append({"name": "sidecar", "image": "s:1"})
    expected = ["PYTHONUNBUFFERED=1", "PET_NPROC_PER_NODE=auto", "PET_NNODES=2"]
    assert env_of(job, "Worker", 0) == ["MINE=1", *expected]
    assert env_of(job, "Worker", 0, container=1) == expected


def test_local_addresses_replace_the_service_names() -> None:
    """The local runtime's `Settings.local_addresses`: the Master's for MASTER_*,
    Worker 0's for the rendezvous (rdzvHost and rdzvPort name hosts of a cluster)."""
    local = {
        "master": ["127.0.0.1:40000"],
        "worker": ["127.0.0.1:40001", "127.0.0.1:40002"],
    }
    elastic = {"rdzvHost": "etcd", "rdzvPort": 2379}
    job = pt_job(elastic=elastic, Master=replica(), Worker=replica(2))
    pod = desired_pod(job, "Worker", 1, Settings(local_addresses=local))
    env = {v["name"]: v["value"] for v in pod["spec"]["containers"][0]["env"]}
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "40000")
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", "40000")
    assert env["PET_RDZV_ENDPOINT"] == "127.0.0.1:40001"
    assert (env["RANK"], env["WORLD_SIZE"]) == ("2", "3")


INIT = {
    "name": "init-pytorch",
    "image": "alpine:3.10",
    "command": [
        "sh",
        "-c",
        "err=1;for i in $(seq 100); do if nslookup pt-master-0; then err=0 && break; "
        "fi;echo waiting for master; sleep 2; done; exit $err",
    ],
    "resources": {
        "limits": {"cpu": "100m", "memory": "20Mi"},
        "requests": {"cpu": "50m", "memory": "10Mi"},
    },
    "imagePullPolicy": "IfNotPresent",
}


class TestInitContainer:
    def test_workers_wait_for_the_master(self) -> None:
        pod = desired_pod(pt_job(Master=replica(), Worker=replica(2)), "Worker", 1, Settings())
        assert pod["spec"]["initContainers"] == [INIT]

    def test_after_the_users_init_containers_with_the_settings(self) -> None:
        job = pt_job(Master=replica(), Worker=replica(1))
        spec = job.spec.pytorch_replica_specs["Worker"].template["spec"]
        spec["initContainers"] = [{"name": "fetch", "image": "busybox"}]
        settings = Settings(
            pytorch_init_container_image="registry.local/alpine:3.20",
            pytorch_init_container_max_tries=7,
        )
        init = desired_pod(job, "Worker", 0, settings)["spec"]["initContainers"]
        assert [c["name"] for c in init] == ["fetch", "init-pytorch"]
        assert init[1]["image"] == "registry.local/alpine:3.20"
        assert "$(seq 7)" in init[1]["command"][2]

    def test_not_on_the_master(self) -> None:
        pod = desired_pod(pt_job(Master=replica(), Worker=replica(1)), "Master", 0, Settings())
        assert "initContainers" not in pod["spec"]

    def test_not_without_a_master(self) -> None:
        pod = desired_pod(pt_job(Worker=replica(2)), "Worker", 1, Settings())
        assert "initContainers" not in pod["spec"]


class TestObjects:
    def test_labels_owner_and_restart_policy(self) -> None:
        pod = desired_pod(pt_job(Master=replica(), Worker=replica(1)), "Master", 0, Settings())
        assert pod["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "pt",
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/job-role": "master",
        }
        assert pod["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": "pt",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert pod["spec"]["restartPolicy"] == "OnFailure"

    @pytest.mark.parametrize(
        ("specs", "role"),
        [
            ({"Master": replica(), "Worker": replica(2)}, ["pt-master-0"]),
            ({"Worker": replica(2)}, ["pt-worker-0"]),
        ],
    )
    def test_master_role_is_the_master_else_worker_0(
        self, specs: dict[str, Any], role: list[str]
    ) -> None:
        pods = [
            o
            for o in desired_objects(with_defaults(pt_job(**specs)), Settings())
            if o["kind"] == "Pod"
        ]
        labelled = [
            p["metadata"]["name"]
            for p in pods
            if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "master"
        ]
        assert labelled == role

    def test_service_exposes_the_pytorch_port(self) -> None:
        service = desired_service(
            with_defaults(pt_job(Master=replica(), Worker=replica(1))), "Master", 0
        )
        assert service["spec"]["ports"] == [{"name": "pytorchjob-port", "port": 23456}]
        assert service["spec"]["selector"]["training.kubeflow.org/operator-name"] == (
            "pytorchjob-controller"
        )


# --- status ---------------------------------------------------------------------------


def pod(rtype: str, index: int, phase: str = "Running", exit_code: int | None = None) -> Pod:
    terminated = Terminated(exit_code=exit_code) if exit_code is not None else None
    return Pod(
        metadata=Meta(
            name=f"pt-{rtype}-{index}",
            namespace="ns",
            uid=f"uid-{rtype}-{index}",
            labels={
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/job-name": "pt",
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": str(index),
            },
            owner_references=(OwnerReference(uid=UID, controller=True, kind="PyTorchJob"),),
        ),
        status=PodStatus(
            phase=phase,
            container_statuses=(
                ContainerStatus(name="pytorch", state=ContainerState(terminated=terminated)),
            ),
        ),
    )


def run(job: PyTorchJob, pods: list[Pod]) -> Plan:
    return reconcile(job, pods, [], NOW, Settings())


def conditions(plan: Plan) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in plan.status.conditions]


CREATED = ("Created", "True", "PyTorchJobCreated")
RUNNING = ("Running", "True", "PyTorchJobRunning")
DONE = [
    CREATED,
    ("Running", "False", "PyTorchJobRunning"),
    ("Succeeded", "True", "PyTorchJobSucceeded"),
]


def running_then(job: PyTorchJob, pods: list[Pod]) -> Plan:
    """Reconcile once with every pod running (Running recorded), then with `pods`."""
    everyone = [
        pod(
            p.metadata.labels["training.kubeflow.org/replica-type"],
            int(p.metadata.labels["training.kubeflow.org/replica-index"]),
        )
        for p in pods
    ]
    first = run(job, everyone)
    assert conditions(first) == [CREATED, RUNNING]
    return run(msgspec.structs.replace(job, status=first.status), pods)


class TestSuccess:
    def test_the_master_decides(self) -> None:
        job = pt_job(Master=replica(), Worker=replica(2))
        plan = running_then(
            job, [pod("master", 0, "Succeeded", 0), pod("worker", 0), pod("worker", 1)]
        )
        assert conditions(plan) == DONE
        assert ("Normal", "PyTorchJobSucceeded") in [(e.type, e.reason) for e in plan.events]

    def test_with_a_master_workers_finishing_is_not_enough(self) -> None:
        job = pt_job(Master=replica(), Worker=replica(1))
        plan = running_then(job, [pod("master", 0), pod("worker", 0, "Succeeded", 0)])
        assert conditions(plan) == [CREATED, RUNNING]

    def test_without_a_master_every_worker_must_succeed(self) -> None:
        job = pt_job(Worker=replica(2))
        half = running_then(job, [pod("worker", 0, "Succeeded", 0), pod("worker", 1)])
        assert conditions(half) == [CREATED, RUNNING]
        both = running_then(
            job, [pod("worker", 0, "Succeeded", 0), pod("worker", 1, "Succeeded", 0)]
        )
        assert conditions(both) == DONE

    def test_elastic_any_worker_succeeding_is_success(self) -> None:
        job = pt_job(elastic={"minReplicas": 1, "maxReplicas": 3}, Worker=replica(3))
        plan = running_then(
            job, [pod("worker", 0), pod("worker", 1, "Succeeded", 0), pod("worker", 2)]
        )
        assert conditions(plan) == DONE


class TestFailure:
    def test_on_failure_restarts_the_pod(self) -> None:
        job = pt_job(Master=replica(), Worker=replica(1))
        plan = run(job, [pod("master", 0), pod("worker", 0, "Failed", 1)])
        assert [a.name for a in plan.actions if isinstance(a, DeletePod)] == ["pt-worker-0"]
        assert ("Restarting", "True", "PyTorchJobRestarting") in conditions(plan)

    def test_never_fails_the_job(self) -> None:
        job = pt_job(Master=replica(restart="Never"), Worker=replica(1, restart="Never"))
        plan = run(job, [pod("master", 0, "Failed", 2), pod("worker", 0)])
        assert ("Failed", "True", "PyTorchJobFailed") in conditions(plan)
        failed = next(c for c in plan.status.conditions if c.type == "Failed")
        assert failed.message == (
            "PyTorchJob pt is failed because 1 Master replica(s) failed. "
            "pt-master-0 exited with code 2."
        )


def test_an_invalid_job_is_failed_with_the_kinds_reasons() -> None:
    job = pt_job(Master=replica(2), Worker=replica(1))
    plan = run(job, [])
    assert conditions(plan)[-1] == ("Failed", "True", "InvalidPyTorchJobSpec")
    assert [e.reason for e in plan.events] == ["PyTorchJobFailedValidation"]
    assert not [a for a in plan.actions if isinstance(a, CreatePod)]


def test_creates_every_pod_and_service_of_a_new_job() -> None:
    plan = run(pt_job(Master=replica(), Worker=replica(2)), [])
    created = [a.name for a in plan.actions if isinstance(a, CreatePod)]
    assert created == ["pt-master-0", "pt-worker-0", "pt-worker-1"]


def test_rendering_leaves_the_job_untouched() -> None:
    job = pt_job(Master=replica(), Worker=replica(1))
    before = copy.deepcopy(msgspec.to_builtins(job))
    desired_pod(job, "Worker", 0, Settings())
    assert msgspec.to_builtins(job) == before
