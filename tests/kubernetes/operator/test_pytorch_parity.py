"""PyTorchJob parity: the pods and services tfjob's core renders for a job are the
ones Kubeflow's training-operator v1.9.4 (the real binary) creates for it.

Kubeflow's operator runs once for the module with `--enable-scheme=pytorchjob` and
its other flags (gang scheduling, the init container's image and tries) at their
defaults; every shape below is created in one namespace, and each pod and service it
made is compared, field by field, with `desired_objects` for the job as the API server
stored it (defaulted by `with_defaults`, default Settings).

What the API server adds to an object (defaults such as terminationMessagePath or a
port's protocol, uid, resourceVersion, timestamps, managedFields) is added to tfjob's
objects the same way: each is created with a server-side dry run first. Status is
not compared (no kubelet runs here); owner references are, uid included, since tfjob
renders from the stored job. Nothing else is normalised but the order of a service's
ports (upstream's comes from a Go map) and what docs/behaviour.md lists as decided
differently: `publishNotReadyAddresses: true` on the services (its table, row 9).
The operator-name label is compared too: both operators label PyTorchJob objects
`pytorchjob-controller`.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod, Service

from testkit.helpers import wait_for
from testkit.parity import as_stored, report
from testkit.training_operator import Kubeflow, stop
from tfjob.core.objects import desired_objects
from tfjob.core.settings import Settings
from tfjob.frameworks.load import decode_job
from tfjob.frameworks.pytorch import PyTorchJob
from tfjob.frameworks.registry import with_defaults

IMAGE = "python:3.11-slim"
PYTORCHJOB = create_namespaced_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "pytorch", "image": IMAGE, "command": ["python3", "-c", "pass"], **extra}


def replica(count: int, *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "replicas": count,
        "template": {"spec": {"containers": list(containers) or [container()]}},
        **extra,
    }


# name -> spec. The job's name is the shape's.
SHAPES: dict[str, dict[str, Any]] = {
    "ddp": {
        "pytorchReplicaSpecs": {
            "Master": {
                **replica(1),
                "template": {
                    "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "first"}},
                    "spec": {"containers": [container()]},
                },
            },
            "Worker": replica(2),
        },
    },
    "workers": {
        "pytorchReplicaSpecs": {"Worker": replica(3, restartPolicy="ExitCode")},
    },
    "elastic": {
        "elasticPolicy": {
            "minReplicas": 1,
            "maxReplicas": 3,
            "rdzvBackend": "c10d",
            "rdzvId": "run-1",
            "rdzvConf": [
                {"key": "join_timeout", "value": "60"},
                {"key": "last_call_timeout", "value": "5"},
            ],
            "maxRestarts": 2,
        },
        "pytorchReplicaSpecs": {"Worker": replica(2)},
    },
    "port": {
        "pytorchReplicaSpecs": {
            "Master": replica(
                1,
                container(
                    env=[{"name": "MINE", "value": "1"}],
                    ports=[
                        {"name": "pytorchjob-port", "containerPort": 29500},
                        {"name": "metrics", "containerPort": 9090},
                    ],
                ),
                {"name": "sidecar", "image": IMAGE, "command": ["sleep", "1"]},
            ),
            "Worker": replica(
                1, container(ports=[{"name": "pytorchjob-port", "containerPort": 29501}])
            ),
        },
    },
    "nproc": {
        "nprocPerNode": "2",
        "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)},
    },
    # The deprecated elasticPolicy.nProcPerNode, with a Master and an explicit
    # rendezvous: upstream's elastic env carries it, and nprocPerNode is not defaulted.
    "elastic-nproc": {
        "elasticPolicy": {
            "maxReplicas": 3,
            "maxRestarts": 1,
            "nProcPerNode": 4,
            "rdzvId": "np",
            "rdzvHost": "rdzv.example",
            "rdzvPort": 29400,
            "standalone": True,
        },
        "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)},
    },
}


def object_names(name: str, spec: dict[str, Any]) -> set[str]:
    return {
        f"{name}-{rtype.lower()}-{index}"
        for rtype, replica_spec in spec["pytorchReplicaSpecs"].items()
        for index in range(replica_spec["replicas"])
    }


@dataclass
class Upstream:
    """What Kubeflow's operator made: the jobs as stored, its pods and services."""

    kube: Client
    namespace: str
    jobs: dict[str, dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    services: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def upstream(
    kube: Client,
    kubeconfig: Path,
    pytorchjob_crd_installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Upstream]:
    namespace = f"pytorch-parity-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels={"tfjob-test": "true"})))
    folder = tmp_path_factory.mktemp("kubeflow")
    running = Kubeflow(kube, kubeconfig, namespace, folder, schemes=("pytorchjob",)).start()
    try:
        for name, spec in SHAPES.items():
            document = {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }
            kube.create(codecs.from_dict(document))
        wanted = set().union(*(object_names(n, s) for n, s in SHAPES.items()))

        def listed(kind: Any) -> dict[str, dict[str, Any]] | None:
            found = {o.metadata.name: o.to_dict() for o in kube.list(kind, namespace=namespace)}
            return found if set(found) == wanted else None

        pods = wait_for(lambda: listed(Pod), 60, message=f"Kubeflow's pods {sorted(wanted)}")
        services = wait_for(lambda: listed(Service), 60, message="Kubeflow's services")
        jobs = {name: kube.get(PYTORCHJOB, name, namespace=namespace).to_dict() for name in SHAPES}
    except BaseException:
        print(f"--- Kubeflow's operator ---\n{running.log_tail(80)}")
        raise
    finally:
        stop(running)
    yield Upstream(kube, namespace, jobs, pods, services)
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, namespace)


def rendered(upstream: Upstream, name: str, kind: str) -> dict[str, dict[str, Any]]:
    """tfjob's objects of this kind for the stored job, by name, as the API server
    would store them."""
    job = with_defaults(decode_job(upstream.jobs[name], PyTorchJob))
    objects = [obj for obj in desired_objects(job, Settings()) if obj["kind"] == kind]
    return {obj["metadata"]["name"]: as_stored(upstream.kube, obj) for obj in objects}


@pytest.mark.parametrize("name", list(SHAPES))
def test_pods_are_kubeflows(upstream: Upstream, name: str) -> None:
    ours = rendered(upstream, name, "Pod")
    theirs = {n: p for n, p in upstream.pods.items() if n in object_names(name, SHAPES[name])}
    assert sorted(ours) == sorted(theirs)
    found = report(theirs, ours)
    assert not found, f"tfjob's objects differ from Kubeflow's:\n{found}"


@pytest.mark.parametrize("name", list(SHAPES))
def test_services_are_kubeflows(upstream: Upstream, name: str) -> None:
    ours = rendered(upstream, name, "Service")
    theirs = {n: s for n, s in upstream.services.items() if n in object_names(name, SHAPES[name])}
    assert sorted(ours) == sorted(theirs)
    for service in ours.values():  # decided differently: docs/behaviour.md, row 9
        assert service["spec"].pop("publishNotReadyAddresses") is True
    for service in [*ours.values(), *theirs.values()]:  # upstream's order: a Go map's
        service["spec"]["ports"].sort(key=lambda port: port["name"])
    found = report(theirs, ours)
    assert not found, f"tfjob's objects differ from Kubeflow's:\n{found}"
