"""MPIJob v1 through the core: its pods, the objects it owns (ServiceAccount, Role,
RoleBinding, the `<job>-config` ConfigMap kept current as workers start) and its
status rules, as Kubeflow's training-operator v1.9.4 has them (the objects field by
field are proven against Kubeflow's own operator in
tests/kubernetes/operator/test_mpi_parity.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from tfjob.api.observed import (
    ContainerState,
    ContainerStatus,
    Meta,
    OwnedObject,
    OwnerReference,
    Pod,
    PodStatus,
    Terminated,
)
from tfjob.core.objects import desired_objects
from tfjob.core.plan import (
    CreateOwned,
    CreatePod,
    CreateService,
    DeleteOwned,
    Plan,
    UpdateOwned,
)
from tfjob.core.reconcile import reconcile
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.mpi import MPIJob
from tfjob.frameworks.registry import FRAMEWORKS, validate, with_defaults

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
IMAGE = "mpioperator/mpi-pi"


def mpijob(workers: int | None = 2, **spec: Any) -> MPIJob:
    specs: dict[str, Any] = {
        "Launcher": {
            "template": {
                "spec": {"containers": [{"name": "mpi", "image": IMAGE, "command": ["mpirun"]}]}
            }
        },
        "Worker": {"template": {"spec": {"containers": [{"name": "mpi", "image": IMAGE}]}}},
    }
    if workers is not None:
        specs["Worker"]["replicas"] = workers
    document = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ns", "uid": "uid-pi"},
        "spec": {"mpiReplicaSpecs": specs, **spec},
    }
    job = decode_job(document, MPIJob)
    assert isinstance(job, MPIJob)
    return job


def pod(name: str, rtype: str, phase: str = "Running", **more: Any) -> Pod:
    labels = {
        "training.kubeflow.org/operator-name": "mpijob-controller",
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/replica-type": rtype,
    }
    if rtype == "worker":
        labels["training.kubeflow.org/replica-index"] = name.rsplit("-", 1)[1]
    code = more.get("code")
    terminated = Terminated(exit_code=code) if code is not None else None
    return Pod(
        metadata=Meta(
            name=name,
            namespace="ns",
            uid=f"uid-{name}",
            labels=labels,
            owner_references=(OwnerReference(uid="uid-pi", controller=True, kind="MPIJob"),),
        ),
        status=PodStatus(
            phase=phase,
            reason=more.get("reason", ""),
            container_statuses=(
                ContainerStatus(name="mpi", state=ContainerState(terminated=terminated)),
            ),
        ),
    )


def observed(manifest: dict[str, Any], version: str = "7") -> OwnedObject:
    """An owned object as the API server returns it (what it adds included)."""
    document = msgspec.json.decode(msgspec.json.encode(manifest))
    document["metadata"] |= {"uid": f"uid-{manifest['kind']}", "resourceVersion": version}
    return OwnedObject.of(document)


def plan(job: MPIJob, pods: list[Pod], owned: list[OwnedObject] | None = None) -> Plan:
    return reconcile(job, pods, [], NOW, Settings(), (), owned or [])


def owned_now(job: MPIJob) -> list[OwnedObject]:
    """What the first plan creates, as observed afterwards."""
    return [observed(a.manifest) for a in plan(job, []).actions if isinstance(a, CreateOwned)]


def test_first_plan_creates_the_launchers_objects_then_pods_and_no_services() -> None:
    actions = plan(mpijob(), []).actions
    owned = [(a.kind.kind, a.name) for a in actions if isinstance(a, CreateOwned)]
    assert owned == [
        ("ServiceAccount", "pi-launcher"),
        ("ConfigMap", "pi-config"),
        ("Role", "pi-launcher"),
        ("RoleBinding", "pi-launcher"),
    ]
    assert [a.name for a in actions if isinstance(a, CreatePod)] == [
        "pi-launcher",
        "pi-worker-0",
        "pi-worker-1",
    ]
    assert not [a for a in actions if isinstance(a, CreateService)]
    first_pod = next(i for i, a in enumerate(actions) if isinstance(a, CreatePod))
    assert all(isinstance(a, CreateOwned) for a in actions[:first_pod])


def test_owned_objects_carry_the_watched_labels_and_the_jobs_owner() -> None:
    for action in plan(mpijob(), []).actions:
        if isinstance(action, CreateOwned):
            meta = action.manifest["metadata"]
            assert meta["labels"] == {
                "app": "pi",
                "training.kubeflow.org/operator-name": "mpijob-controller",
                "training.kubeflow.org/job-name": "pi",
            }
            (owner,) = meta["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == ("MPIJob", "uid-pi", True)


def test_config_map_holds_hostfile_kubexec_and_the_running_workers() -> None:
    job = mpijob(slotsPerWorker=4, mainContainer="trainer")
    (config,) = [o for o in owned_now(job) if o.kind == "ConfigMap"]
    data = config.document["data"]
    assert data["hostfile"] == "pi-worker-0 slots=4\npi-worker-1 slots=4\n"
    assert data["kubexec.sh"].endswith(
        '/opt/kube/kubectl exec ${POD_NAME} --container trainer -- /bin/sh -c "$*"'
    )
    assert data["discover_hosts.sh"] == "#!/bin/sh"
    # Worker 1 starts: the ConfigMap is updated, nothing else is.
    pods = [pod("pi-launcher", "launcher", "Pending"), pod("pi-worker-1", "worker")]
    pods.append(pod("pi-worker-0", "worker", "Pending"))
    (update,) = [a for a in plan(job, pods, owned_now(job)).actions if isinstance(a, UpdateOwned)]
    assert update.kind.kind == "ConfigMap"
    assert update.manifest["metadata"]["resourceVersion"] == "7"  # a conditional PUT
    assert update.manifest["data"]["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-1:4"


def test_objects_as_wanted_plus_server_defaults_need_no_write() -> None:
    job = mpijob()
    objects = owned_now(job)
    for obj in objects:
        obj.document["metadata"]["creationTimestamp"] = "2026-11-30T12:00:00Z"
    pods = [pod("pi-launcher", "launcher", "Pending")] + [
        pod(f"pi-worker-{i}", "worker", "Pending") for i in range(2)
    ]
    actions = plan(job, pods, objects).actions
    assert not [a for a in actions if isinstance(a, CreateOwned | UpdateOwned | DeleteOwned)]


def test_scaled_workers_update_the_role_and_hostfile_and_delete_nothing() -> None:
    objects = owned_now(mpijob(workers=2))
    actions = plan(mpijob(workers=3), [], objects).actions
    updated = {a.kind.kind: a.manifest for a in actions if isinstance(a, UpdateOwned)}
    assert set(updated) == {"ConfigMap", "Role"}
    assert updated["Role"]["rules"][1]["resourceNames"] == [
        "pi-worker-0",
        "pi-worker-1",
        "pi-worker-2",
    ]
    assert not [a for a in actions if isinstance(a, DeleteOwned)]


def test_launcher_pod_and_worker_pod_as_upstream_makes_them() -> None:
    job = with_defaults(mpijob())
    pods = {
        o["metadata"]["name"]: o for o in desired_objects(job, Settings()) if o["kind"] == "Pod"
    }
    launcher, worker = pods["pi-launcher"], pods["pi-worker-0"]
    assert "training.kubeflow.org/replica-index" not in launcher["metadata"]["labels"]
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in worker["metadata"]["labels"]
    assert launcher["spec"]["serviceAccountName"] == "pi-launcher"
    (init,) = launcher["spec"]["initContainers"]
    assert (init["name"], init["image"]) == (
        "kubectl-delivery",
        "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest",
    )
    env = {e["name"]: e["value"] for e in launcher["spec"]["containers"][0]["env"]}
    assert env["OMPI_MCA_plm_rsh_agent"] == "/etc/mpi/kubexec.sh"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["I_MPI_HYDRA_BOOTSTRAP"] == "rsh"
    assert worker["spec"]["containers"][0]["command"] == ["sleep"]
    assert worker["spec"]["containers"][0]["args"] == ["365d"]
    assert "ports" not in worker["spec"]["containers"][0]  # no default port
    assert worker["spec"]["restartPolicy"] == "Never"


def test_kubectl_delivery_image_comes_from_the_settings() -> None:
    job = with_defaults(mpijob())
    settings = Settings(mpi_kubectl_delivery_image="registry.example/kubectl:1")
    (launcher,) = [
        o
        for o in desired_objects(job, settings)
        if o["metadata"]["name"] == "pi-launcher"
        if o["kind"] == "Pod"
    ]
    assert launcher["spec"]["initContainers"][0]["image"] == "registry.example/kubectl:1"


def _launcher_env(job: MPIJob, settings: Settings) -> dict[str, str]:
    (launcher,) = [
        o
        for o in desired_objects(job, settings)
        if o["kind"] == "Pod" and o["metadata"]["name"] == "pi-launcher"
    ]
    return {e["name"]: e["value"] for e in launcher["spec"]["containers"][0]["env"]}


def test_locally_the_launcher_env_names_the_runtimes_files_and_root_is_allowed() -> None:
    job = with_defaults(mpijob(slotsPerWorker=3))
    env = _launcher_env(job, Settings(local_files_dir="/tmp/run-x", local_as_root=True))
    assert env["OMPI_MCA_plm_rsh_agent"] == "/tmp/run-x/kubexec.sh"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/tmp/run-x/hostfile"
    assert env["I_MPI_HYDRA_BOOTSTRAP_EXEC"] == "/tmp/run-x/kubexec.sh"
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    not_root = _launcher_env(job, Settings(local_files_dir="/tmp/run-x"))
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in not_root
    # A cluster's root is the container's: the pods there are upstream's, unchanged.
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in _launcher_env(job, Settings(local_as_root=True))
    files = FRAMEWORKS["MPIJob"].local_files(job)
    assert files["hostfile"] == ("localhost slots=6\n", 0o444)  # 2 workers x 3 slots
    assert files["discover_hosts.sh"][0] == "#!/bin/sh\necho localhost:6\n"
    assert files["kubexec.sh"][0].endswith('exec /bin/sh -c "$*"\n')


def test_workers_default_to_none_and_the_launcher_is_required_in_exact_case() -> None:
    assert with_defaults(mpijob(workers=None)).spec.mpi_replica_specs["Worker"].replicas == 0
    job = mpijob()
    specs = job.spec.mpi_replica_specs
    renamed = {"launcher": specs["Launcher"], "Worker": specs["Worker"]}
    bad = msgspec.structs.replace(
        job, spec=msgspec.structs.replace(job.spec, mpi_replica_specs=renamed)
    )
    problems = " ".join(str(e) for e in validate(bad))
    assert "unsupported replica type 'launcher'" in problems
    assert "must have a Launcher" in problems


def test_launcher_decides_success_and_the_workers_are_no_longer_read() -> None:
    job = mpijob()
    pods = [pod("pi-launcher", "launcher", "Succeeded", code=0)]
    pods += [pod(f"pi-worker-{i}", "worker") for i in range(2)]
    done = plan(job, pods, owned_now(job))
    succeeded = next(c for c in done.status.conditions if c.type == "Succeeded")
    assert (succeeded.reason, succeeded.message) == (
        "MPIJobSucceeded",
        "MPIJob pi is successfully completed.",
    )
    counts = {k: msgspec.to_builtins(v) for k, v in done.status.replica_statuses.items()}
    assert counts == {"Launcher": {"succeeded": 1}, "Worker": {}}
    assert not [a for a in done.actions if isinstance(a, CreateOwned | UpdateOwned)]


def test_running_while_the_launcher_runs() -> None:
    job = mpijob()
    pods = [pod("pi-launcher", "launcher"), pod("pi-worker-0", "worker", "Pending")]
    running = next(c for c in plan(job, pods).status.conditions if c.type == "Running")
    assert (running.reason, running.message) == ("MPIJobRunning", "MPIJob pi is running.")


def test_failed_and_evicted_launcher() -> None:
    job = mpijob()
    workers = [pod(f"pi-worker-{i}", "worker") for i in range(2)]
    failed = plan(job, [pod("pi-launcher", "launcher", "Failed", code=1), *workers])
    condition = next(c for c in failed.status.conditions if c.type == "Failed")
    assert condition.reason == "MPIJobFailed"
    assert condition.message.startswith("MPIJob pi is failed because 1 Launcher replica(s) failed.")
    evicted = plan(job, [pod("pi-launcher", "launcher", "Failed", reason="Evicted"), *workers])
    condition = next(c for c in evicted.status.conditions if c.type == "Failed")
    assert condition.reason == "MPIJobEvicted"


def test_an_evicted_worker_fails_the_job() -> None:
    job = mpijob()
    pods = [
        pod("pi-launcher", "launcher"),
        pod("pi-worker-0", "worker"),
        pod("pi-worker-1", "worker", "Failed", reason="Evicted"),
    ]
    condition = next(c for c in plan(job, pods).status.conditions if c.type == "Failed")
    assert condition.reason == "MPIJobEvicted"
    assert condition.message.startswith("MPIJob pi is failed because 1 Worker replica(s) failed.")
