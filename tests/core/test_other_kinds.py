"""JAXJob, XGBoostJob and PaddleJob through the core: status rules, the job-role
label, defaults, and the env at the local runtime's addresses, as Kubeflow v1.9.4
has them (the cluster env, field by field, is proven against Kubeflow's own operator
in tests/kubernetes/operator/test_kinds_parity.py)."""

from __future__ import annotations

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
from tfjob.api.types import Job
from tfjob.core.objects import desired_pod
from tfjob.core.plan import Plan
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.registry import FRAMEWORKS, with_defaults

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def make(kind: str, restart: str = "", extra: dict[str, Any] | None = None, **types: int) -> Job:
    framework = FRAMEWORKS[kind]
    container = {"name": framework.container_name, "image": "img"}
    specs = {
        rtype: {
            "replicas": count,
            "template": {"spec": {"containers": [container]}},
            **({"restartPolicy": restart} if restart else {}),
        }
        for rtype, count in types.items()
    }
    document = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "j", "namespace": "ns", "uid": "uid-j"},
        "spec": {framework.spec_field: specs, **(extra or {})},
    }
    return decode_job(document, framework.job_type)


def pod(job: Job, rtype: str, index: int, phase: str = "Running", code: int | None = None) -> Pod:
    framework = FRAMEWORKS[job.kind]
    terminated = Terminated(exit_code=code) if code is not None else None
    return Pod(
        metadata=Meta(
            name=f"j-{rtype}-{index}",
            namespace="ns",
            uid=f"uid-{rtype}-{index}",
            labels={
                "training.kubeflow.org/operator-name": framework.controller_name,
                "training.kubeflow.org/job-name": "j",
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": str(index),
            },
            owner_references=(OwnerReference(uid="uid-j", controller=True, kind=job.kind),),
        ),
        status=PodStatus(
            phase=phase,
            container_statuses=(
                ContainerStatus(
                    name=framework.container_name, state=ContainerState(terminated=terminated)
                ),
            ),
        ),
    )


def run(job: Job, pods: list[Pod]) -> Plan:
    return reconcile(job, pods, [], NOW, Settings())


def last(plan: Plan) -> tuple[str, str]:
    condition = plan.status.conditions[-1]
    return condition.type, condition.reason


def after_running(job: Job, pods: list[Pod]) -> Plan:
    """Reconcile with every pod running, then with `pods`."""
    labels = [p.metadata.labels for p in pods]
    everyone = [
        pod(
            job,
            lb["training.kubeflow.org/replica-type"],
            int(lb["training.kubeflow.org/replica-index"]),
        )
        for lb in labels
    ]
    first = run(job, everyone)
    return run(msgspec.structs.replace(job, status=first.status), pods)


class TestSuccess:
    def test_a_jaxjob_needs_every_worker(self) -> None:
        job = make("JAXJob", Worker=2)
        half = after_running(job, [pod(job, "worker", 0, "Succeeded", 0), pod(job, "worker", 1)])
        assert last(half) == ("Running", "JAXJobRunning")
        both = after_running(
            job, [pod(job, "worker", 0, "Succeeded", 0), pod(job, "worker", 1, "Succeeded", 0)]
        )
        assert last(both) == ("Succeeded", "JAXJobSucceeded")

    def test_an_xgboostjob_ends_with_its_master(self) -> None:
        job = make("XGBoostJob", Master=1, Worker=2)
        workers_done = [pod(job, "worker", i, "Succeeded", 0) for i in range(2)]
        plan = after_running(job, [pod(job, "master", 0), *workers_done])
        assert last(plan) == ("Running", "XGBoostJobRunning")
        plan = after_running(job, [pod(job, "master", 0, "Succeeded", 0), pod(job, "worker", 0)])
        assert last(plan) == ("Succeeded", "XGBoostJobSucceeded")

    @pytest.mark.parametrize(
        ("types", "ending", "expected"),
        [
            ({"Master": 1, "Worker": 1}, [("master", 0)], "Succeeded"),
            ({"Master": 1, "Worker": 1}, [("worker", 0)], "Running"),
            ({"Worker": 2}, [("worker", 0)], "Running"),
            ({"Worker": 2}, [("worker", 0), ("worker", 1)], "Succeeded"),
        ],
        ids=["ps-master", "ps-worker", "collective-one", "collective-all"],
    )
    def test_a_paddlejob_ends_with_its_master_else_every_worker(
        self, types: dict[str, int], ending: list[tuple[str, int]], expected: str
    ) -> None:
        job = make("PaddleJob", **types)
        pods = [
            pod(job, rtype.lower(), i, *(("Succeeded", 0) if (rtype.lower(), i) in ending else ()))
            for rtype, count in types.items()
            for i in range(count)
        ]
        assert last(after_running(job, pods)) == (expected, f"PaddleJob{expected}")


@pytest.mark.parametrize(
    ("kind", "restart", "code", "expected"),
    [
        ("JAXJob", "", 3, "Failed"),  # default Never
        ("XGBoostJob", "", 3, "Failed"),  # default Never
        ("PaddleJob", "", 3, "Restarting"),  # default OnFailure
        ("XGBoostJob", "ExitCode", 137, "Restarting"),  # killed: retryable
        ("XGBoostJob", "ExitCode", 3, "Failed"),  # the program's own error: permanent
    ],
)
def test_a_failed_worker_fails_or_restarts_by_its_policy(
    kind: str, restart: str, code: int, expected: str
) -> None:
    types = {"Master": 1, "Worker": 1} if kind == "XGBoostJob" else {"Worker": 1}
    job = make(kind, restart, **types)
    pods = [pod(job, t.lower(), 0) for t in types if t != "Worker"]
    plan = run(job, [*pods, pod(job, "worker", 0, "Failed", code)])
    assert last(plan) == (expected, f"{kind}{expected}")


@pytest.mark.parametrize(
    ("kind", "types", "masters"),
    [
        ("JAXJob", {"Worker": 3}, ["j-worker-0"]),
        ("XGBoostJob", {"Master": 1, "Worker": 2}, ["j-master-0"]),
        ("PaddleJob", {"Master": 2, "Worker": 1}, ["j-master-0", "j-master-1"]),
        ("PaddleJob", {"Worker": 2}, []),  # upstream: no Master, no job-role at all
    ],
)
def test_the_job_role_label_follows_upstreams_rule(
    kind: str, types: dict[str, int], masters: list[str]
) -> None:
    job = with_defaults(make(kind, **types))
    labelled = [
        f"j-{t.lower()}-{i}"
        for t, count in types.items()
        for i in range(count)
        if "training.kubeflow.org/job-role"
        in desired_pod(job, t, i, Settings())["metadata"]["labels"]
    ]
    assert labelled == masters


@pytest.mark.parametrize(
    ("kind", "restart", "port"),
    [("JAXJob", "Never", 6666), ("XGBoostJob", "Never", 9999), ("PaddleJob", "OnFailure", 36543)],
)
def test_defaults(kind: str, restart: str, port: int) -> None:
    types = {"master": 1, "worker": 1} if kind == "XGBoostJob" else {"worker": 2}
    job = with_defaults(make(kind, **types))
    spec = job.spec.replica_specs
    assert list(spec) == [t.capitalize() for t in types]
    assert {s.restart_policy for s in spec.values()} == {restart}
    assert job.spec.run_policy.clean_pod_policy == "None"
    ports = spec["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": FRAMEWORKS[kind].port_name, "containerPort": port}]


def test_paddle_elastic_limits_default_to_each_other_else_the_workers() -> None:
    def limits(elastic: dict[str, Any]) -> tuple[int | None, int | None]:
        defaulted = with_defaults(make("PaddleJob", extra={"elasticPolicy": elastic}, Worker=3))
        policy = defaulted.spec.elastic_policy  # type: ignore[attr-defined]
        return policy.min_replicas, policy.max_replicas

    assert limits({}) == (3, 3)
    assert limits({"maxReplicas": 5}) == (5, 5)
    assert limits({"minReplicas": 2}) == (2, 2)
    assert limits({"minReplicas": 1, "maxReplicas": 4}) == (1, 4)


def env_of(job: Job, rtype: str, index: int, settings: Settings) -> dict[str, Any]:
    pod_spec = desired_pod(with_defaults(job), rtype, index, settings)["spec"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec["containers"][0]["env"]}


LOCAL = Settings(
    local_addresses={
        "master": ["127.0.0.1:41000"],
        "worker": ["127.0.0.1:41001", "127.0.0.1:41002", "127.0.0.1:41003"],
    }
)


def test_local_jax_env_points_at_worker_0_on_this_machine() -> None:
    env = env_of(make("JAXJob", Worker=3), "Worker", 2, LOCAL)
    assert env["COORDINATOR_ADDRESS"] == "127.0.0.1"
    assert (env["COORDINATOR_PORT"], env["NUM_PROCESSES"], env["PROCESS_ID"]) == ("41001", "3", "2")


def test_local_xgboost_env_lists_each_worker_with_its_own_port() -> None:
    env = env_of(make("XGBoostJob", Master=1, Worker=3), "Worker", 1, LOCAL)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "41000")
    assert (env["WORLD_SIZE"], env["RANK"]) == ("4", "2")
    assert env["WORKER_ADDRS"] == "127.0.0.1:41001,127.0.0.1:41002,127.0.0.1:41003"
    assert env["WORKER_PORT"] == "41001"


@pytest.mark.parametrize(
    ("types", "rtype", "index", "master"),
    [
        ({"Worker": 3}, "Worker", 0, "$(POD_IP_DUMMY):41001"),
        ({"Worker": 3}, "Worker", 2, "127.0.0.1:41001"),
        ({"Master": 1, "Worker": 2}, "Master", 0, "$(POD_IP_DUMMY):41000"),
        ({"Master": 1, "Worker": 2}, "Worker", 0, "127.0.0.1:41000"),
    ],
)
def test_local_paddle_master_is_the_rendezvous_replica_on_this_machine(
    types: dict[str, int], rtype: str, index: int, master: str
) -> None:
    env = env_of(make("PaddleJob", **types), rtype, index, LOCAL)
    assert env["PADDLE_MASTER"] == master
    assert env["PADDLE_NNODES"] == str(sum(types.values()))
