"""MPIJob's objects and PyTorchJob's HPA: what tfjob's core renders for a job is what
Kubeflow's training-operator v1.9.4 (the real binary) creates.

Kubeflow's operator runs once for the module (`--enable-scheme` mpijob and
pytorchjob); every shape below is created in one namespace, and each object it made
(pods, the ServiceAccount, Role, RoleBinding and `<job>-config` ConfigMap of an
MPIJob, a PyTorchJob's HorizontalPodAutoscaler) is compared, field by field
(testkit/parity.py), with `desired_objects` for the job as the API server stored it.
Then the scripted kubelet starts some workers, and the ConfigMap Kubeflow rewrites
(`discover_hosts.sh`) is compared with what tfjob wants for the same pods.

Allowed difference (docs/behaviour.md): tfjob's owned objects also carry the
operator-name and job-name labels, which its informers select them by.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from testkit.helpers import wait_for
from testkit.kubelet import FakeKubelet
from testkit.parity import as_stored, report
from testkit.training_operator import Kubeflow, stop
from tfjob.api import constants as c
from tfjob.api.observed import Pod as ObservedPod
from tfjob.core.objects import desired_objects, owned_manifests
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.registry import FRAMEWORKS, with_defaults

IMAGE = "mpioperator/mpi-pi:openmpi"
RESOURCES = {
    kind: create_namespaced_resource("kubeflow.org", "v1", kind, f"{kind.lower()}s")
    for kind in ("MPIJob", "PyTorchJob")
}
OWNED = {"ServiceAccount": ServiceAccount, "ConfigMap": ConfigMap, "Role": Role}
OWNED |= {"RoleBinding": RoleBinding, "HorizontalPodAutoscaler": HorizontalPodAutoscaler}
OURS_ONLY = (c.LABEL_OPERATOR_NAME, c.LABEL_JOB_NAME)  # on owned objects: behaviour.md


def mpi(name: str = "mpi", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **extra}


def replica(*containers: dict[str, Any], count: int | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": list(containers)}}, **extra}
    if count is not None:
        spec["replicas"] = count
    return spec


CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
}

# (kind, job name) -> spec.
SHAPES: dict[tuple[str, str], dict[str, Any]] = {
    ("MPIJob", "pi"): {
        "slotsPerWorker": 2,
        "mpiReplicaSpecs": {
            "Launcher": replica(mpi(command=["mpirun", "-n", "4", "/home/mpiuser/pi"])),
            "Worker": replica(mpi(), count=2),
        },
    },
    ("MPIJob", "main"): {
        "mainContainer": "trainer",
        "cleanPodPolicy": "Running",
        "mpiReplicaSpecs": {
            "Launcher": {
                "template": {
                    "metadata": {"labels": {"team": "hpc"}, "annotations": {"note": "l"}},
                    "spec": {
                        "serviceAccountName": "mpi-runner",
                        "restartPolicy": "OnFailure",
                        "containers": [
                            mpi(
                                "trainer",
                                command=["mpirun", "hostname"],
                                env=[
                                    {"name": "MINE", "value": "1"},
                                    {"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "ssh"},
                                ],
                            ),
                            mpi("sidecar", command=["sleep", "1"]),
                        ],
                    },
                }
            },
            "Worker": replica(
                mpi("trainer", command=["sleep"], args=["1d"]),
                mpi("sidecar", command=["sleep", "1"]),
                count=3,
                restartPolicy="ExitCode",
            ),
        },
    },
    ("MPIJob", "gpu"): {
        "mpiReplicaSpecs": {
            "Launcher": replica(
                mpi(command=["mpirun", "x"], resources={"limits": {"nvidia.com/gpu": "1"}})
            ),
            "Worker": replica(mpi(args=["--verbose"]), count=1),
        },
    },
    ("MPIJob", "solo"): {"mpiReplicaSpecs": {"Launcher": replica(mpi(command=["mpirun", "x"]))}},
    ("PyTorchJob", "elastic-hpa"): {
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "metrics": [CPU]},
        "pytorchReplicaSpecs": {
            "Worker": replica({"name": "pytorch", "image": "torch:1"}, count=2)
        },
    },
}
RUNNING_WORKERS = ("pi-worker-1",)  # started by the kubelet for the ConfigMap update


def pod_names(kind: str, name: str, spec: dict[str, Any]) -> set[str]:
    field = FRAMEWORKS[kind].spec_field
    framework = FRAMEWORKS[kind]
    return {
        framework.pod_name(name, rtype, index)
        for rtype, replica_spec in spec[field].items()
        for index in range(replica_spec.get("replicas", 1 if rtype != "Worker" else 0))
    }


def owned_names(kind: str, name: str) -> dict[str, set[str]]:
    if kind == "PyTorchJob":
        return {"HorizontalPodAutoscaler": {name}}
    account = "mpi-runner" if name == "main" else f"{name}-launcher"
    launcher = f"{name}-launcher"
    return {
        "ServiceAccount": {account},
        "ConfigMap": {f"{name}-config"},
        "Role": {launcher},
        "RoleBinding": {launcher},
    }


@dataclass
class Upstream:
    """What Kubeflow's operator made: the jobs as stored, and its objects by kind."""

    kube: Client
    namespace: str
    jobs: dict[str, dict[str, Any]]
    objects: dict[str, dict[str, dict[str, Any]]]  # kind -> name -> object
    config_after_start: dict[str, Any]  # pi-config once RUNNING_WORKERS run
    pods_after_start: list[dict[str, Any]]


def _listed(kube: Client, resource: Any, namespace: str, wanted: set[str]) -> Any:
    found = {o.metadata.name: o.to_dict() for o in kube.list(resource, namespace=namespace)}
    return found if wanted <= set(found) else None


@pytest.fixture(scope="module")
def upstream(
    kube: Client,
    kubeconfig: Path,
    pytorchjob_crd_installed: None,
    kind_crds_installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Upstream]:
    namespace = f"mpi-parity-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels={"tfjob-test": "true"})))
    folder = tmp_path_factory.mktemp("kubeflow")
    schemes = ("mpijob", "pytorchjob")
    running = Kubeflow(kube, kubeconfig, namespace, folder, schemes=schemes).start()
    try:
        for (kind, name), spec in SHAPES.items():
            document = {
                "apiVersion": "kubeflow.org/v1",
                "kind": kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }
            kube.create(codecs.from_dict(document))
        objects: dict[str, dict[str, dict[str, Any]]] = {}
        wanted_pods = set().union(*(pod_names(k, n, s) for (k, n), s in SHAPES.items()))
        objects["Pod"] = wait_for(
            lambda: _listed(kube, Pod, namespace, wanted_pods), 60, message="Kubeflow's pods"
        )
        for what, resource in OWNED.items():
            names = set().union(*(owned_names(k, n).get(what, set()) for k, n in SHAPES))
            objects[what] = wait_for(
                lambda r=resource, n=names: _listed(kube, r, namespace, n),  # type: ignore[misc]
                60,
                message=f"Kubeflow's {what}s",
            )
        jobs = {
            name: kube.get(RESOURCES[kind], name, namespace=namespace).to_dict()
            for kind, name in SHAPES
        }
        kubelet = FakeKubelet(kube)
        for worker in RUNNING_WORKERS:
            kubelet.run(namespace, worker)

        def updated() -> dict[str, Any] | None:
            config = kube.get(ConfigMap, "pi-config", namespace=namespace).to_dict()
            shown = config["data"]["discover_hosts.sh"]
            return config if all(w in shown for w in RUNNING_WORKERS) else None

        config_after = wait_for(updated, 60, message="Kubeflow's ConfigMap with the workers")
        pods_after = [p.to_dict() for p in kube.list(Pod, namespace=namespace)]
    except BaseException:
        print(f"--- Kubeflow's operator ---\n{running.log_tail(80)}")
        raise
    finally:
        stop(running)
    yield Upstream(kube, namespace, jobs, objects, config_after, pods_after)
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, namespace)


def ours(upstream: Upstream, kind: str, name: str, of: str) -> dict[str, dict[str, Any]]:
    """tfjob's objects of kind `of` for the stored job, as the API server stores them,
    without the two labels only tfjob's owned objects carry."""
    job = with_defaults(decode_job(upstream.jobs[name], FRAMEWORKS[kind].job_type))
    found = {}
    for obj in desired_objects(job, Settings()):
        if obj["kind"] != of:
            continue
        if of != "Pod":
            labels = obj["metadata"]["labels"]
            for key in OURS_ONLY:
                del labels[key]
            if not labels:
                del obj["metadata"]["labels"]
        found[obj["metadata"]["name"]] = as_stored(upstream.kube, obj)
    return found


def whole(obj: dict[str, Any]) -> dict[str, Any]:
    """What `report` compares, for objects without a spec: every field but status."""
    return {"metadata": obj["metadata"], "spec": {k: v for k, v in obj.items() if k not in (
        "apiVersion", "kind", "metadata", "status")}}  # fmt: skip


SHAPE_IDS = [name for _, name in SHAPES]


@pytest.mark.parametrize(("kind", "name"), list(SHAPES), ids=SHAPE_IDS)
def test_pods_are_kubeflows(upstream: Upstream, kind: str, name: str) -> None:
    mine = ours(upstream, kind, name, "Pod")
    names = pod_names(kind, name, SHAPES[kind, name])
    theirs = {n: p for n, p in upstream.objects["Pod"].items() if n in names}
    assert sorted(mine) == sorted(theirs) == sorted(names)
    found = report(theirs, mine)
    assert not found, f"tfjob's objects differ from Kubeflow's:\n{found}"


@pytest.mark.parametrize(("kind", "name"), list(SHAPES), ids=SHAPE_IDS)
def test_owned_objects_are_kubeflows(upstream: Upstream, kind: str, name: str) -> None:
    for what, names in owned_names(kind, name).items():
        mine = {n: whole(o) for n, o in ours(upstream, kind, name, what).items()}
        theirs = {n: whole(o) for n, o in upstream.objects[what].items() if n in names}
        assert sorted(mine) == sorted(theirs) == sorted(names), what
        found = report(theirs, mine)
        assert not found, f"tfjob's {what} differs from Kubeflow's:\n{found}"


def test_config_map_follows_the_running_workers_as_kubeflows(upstream: Upstream) -> None:
    job = with_defaults(decode_job(upstream.jobs["pi"], FRAMEWORKS["MPIJob"].job_type))
    pods = [
        msgspec.convert(p, ObservedPod, strict=False)
        for p in upstream.pods_after_start
        if p["metadata"]["name"].startswith("pi-")
    ]
    (config,) = [o for o in owned_manifests(job, pods, Settings()) if o["kind"] == "ConfigMap"]
    assert "pi-worker-1" in config["data"]["discover_hosts.sh"]
    assert config["data"] == upstream.config_after_start["data"]
