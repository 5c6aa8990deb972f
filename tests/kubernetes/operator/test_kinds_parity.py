"""JAXJob, XGBoostJob and PaddleJob parity: the pods and services tfjob's core renders
for a job are the ones Kubeflow's training-operator v1.9.4 (the real binary) creates.

As test_pytorch_parity.py, for the other kinds: Kubeflow's operator runs once for the
module with `--enable-scheme` for the three kinds; every shape below is created in one
namespace, and each pod and service it made is compared, field by field
(testkit/parity.py), with `desired_objects` for the job as the API server stored it.
Allowed differences: the order of a service's ports and `publishNotReadyAddresses`
(docs/behaviour.md, row 9).
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
from tfjob.frameworks.registry import FRAMEWORKS, with_defaults

IMAGE = "python:3.11-slim"
KINDS = ("JAXJob", "XGBoostJob", "PaddleJob")
RESOURCES = {
    kind: create_namespaced_resource("kubeflow.org", "v1", kind, f"{kind.lower()}s")
    for kind in KINDS
}


def container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "command": ["python3", "-c", "pass"], **extra}


def replica(count: int, *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"replicas": count, "template": {"spec": {"containers": list(containers)}}, **extra}


def sidecar() -> dict[str, Any]:
    return {"name": "sidecar", "image": IMAGE, "command": ["sleep", "1"]}


def port(name: str, number: int) -> list[dict[str, Any]]:
    return [{"name": name, "containerPort": number}, {"name": "metrics", "containerPort": 9090}]


def jax(**extra: Any) -> dict[str, Any]:
    return container("jax", **extra)


def xgb(**extra: Any) -> dict[str, Any]:
    return container("xgboost", **extra)


def paddle(**extra: Any) -> dict[str, Any]:
    return container("paddle", **extra)


# (kind, job name) -> spec.
SHAPES: dict[tuple[str, str], dict[str, Any]] = {
    ("JAXJob", "jax-workers"): {"jaxReplicaSpecs": {"Worker": replica(3, jax())}},
    ("JAXJob", "jax-port"): {
        "jaxReplicaSpecs": {
            "Worker": {
                **replica(
                    2,
                    jax(env=[{"name": "MINE", "value": "1"}], ports=port("jaxjob-port", 1234)),
                    sidecar(),
                ),
                "restartPolicy": "ExitCode",
            }
        }
    },
    ("JAXJob", "jax-one"): {
        "jaxReplicaSpecs": {
            "worker": {
                "template": {
                    "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "first"}},
                    "spec": {"containers": [jax()]},
                }
            }
        }
    },
    ("XGBoostJob", "xgb"): {
        "xgbReplicaSpecs": {"Master": replica(1, xgb()), "Worker": replica(2, xgb())}
    },
    ("XGBoostJob", "xgb-master"): {"xgbReplicaSpecs": {"Master": replica(1, xgb())}},
    ("XGBoostJob", "xgb-port"): {
        "xgbReplicaSpecs": {
            "Master": replica(1, xgb(ports=port("xgboostjob-port", 9000)), sidecar()),
            "Worker": replica(
                3, xgb(ports=port("xgboostjob-port", 9001)), restartPolicy="OnFailure"
            ),
        }
    },
    ("PaddleJob", "pd-collective"): {"paddleReplicaSpecs": {"Worker": replica(2, paddle())}},
    ("PaddleJob", "pd-ps"): {
        "paddleReplicaSpecs": {"Master": replica(2, paddle()), "Worker": replica(2, paddle())}
    },
    ("PaddleJob", "pd-port"): {
        "paddleReplicaSpecs": {
            "Worker": replica(
                3,
                paddle(env=[{"name": "MINE", "value": "1"}], ports=port("master", 40000)),
                sidecar(),
                restartPolicy="Never",
            )
        }
    },
    ("PaddleJob", "pd-elastic"): {
        "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4, "maxRestarts": 3},
        "paddleReplicaSpecs": {"Worker": replica(2, paddle())},
    },
}


def object_names(name: str, spec: dict[str, Any]) -> set[str]:
    (field,) = (key for key in spec if key.endswith("ReplicaSpecs"))
    return {
        f"{name}-{rtype.lower()}-{index}"
        for rtype, replica_spec in spec[field].items()
        for index in range(replica_spec.get("replicas", 1))
    }


@dataclass
class Upstream:
    """What Kubeflow's operator made: the jobs as stored, its pods and services."""

    kube: Client
    jobs: dict[str, dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    services: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def upstream(
    kube: Client,
    kubeconfig: Path,
    kind_crds_installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Upstream]:
    namespace = f"kinds-parity-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=namespace, labels={"tfjob-test": "true"})))
    folder = tmp_path_factory.mktemp("kubeflow")
    schemes = tuple(kind.lower() for kind in KINDS)
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
        wanted = set().union(*(object_names(n, s) for (_, n), s in SHAPES.items()))

        def listed(kind: Any) -> dict[str, dict[str, Any]] | None:
            found = {o.metadata.name: o.to_dict() for o in kube.list(kind, namespace=namespace)}
            return found if set(found) == wanted else None

        pods = wait_for(lambda: listed(Pod), 60, message=f"Kubeflow's pods {sorted(wanted)}")
        services = wait_for(lambda: listed(Service), 60, message="Kubeflow's services")
        jobs = {
            name: kube.get(RESOURCES[kind], name, namespace=namespace).to_dict()
            for kind, name in SHAPES
        }
    except BaseException:
        print(f"--- Kubeflow's operator ---\n{running.log_tail(80)}")
        raise
    finally:
        stop(running)
    yield Upstream(kube, jobs, pods, services)
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, namespace)


def rendered(upstream: Upstream, kind: str, name: str, of: str) -> dict[str, dict[str, Any]]:
    """tfjob's objects (`of`: Pod or Service) for the stored job, by name, as the API
    server would store them."""
    job = with_defaults(decode_job(upstream.jobs[name], FRAMEWORKS[kind].job_type))
    objects = [obj for obj in desired_objects(job, Settings()) if obj["kind"] == of]
    return {obj["metadata"]["name"]: as_stored(upstream.kube, obj) for obj in objects}


SHAPE_IDS = [name for _, name in SHAPES]


@pytest.mark.parametrize(("kind", "name"), list(SHAPES), ids=SHAPE_IDS)
def test_pods_are_kubeflows(upstream: Upstream, kind: str, name: str) -> None:
    ours = rendered(upstream, kind, name, "Pod")
    mine = object_names(name, SHAPES[kind, name])
    theirs = {n: p for n, p in upstream.pods.items() if n in mine}
    assert sorted(ours) == sorted(theirs)
    found = report(theirs, ours)
    assert not found, f"tfjob's objects differ from Kubeflow's:\n{found}"


@pytest.mark.parametrize(("kind", "name"), list(SHAPES), ids=SHAPE_IDS)
def test_services_are_kubeflows(upstream: Upstream, kind: str, name: str) -> None:
    ours = rendered(upstream, kind, name, "Service")
    mine = object_names(name, SHAPES[kind, name])
    theirs = {n: s for n, s in upstream.services.items() if n in mine}
    assert sorted(ours) == sorted(theirs)
    for service in ours.values():  # decided differently: docs/behaviour.md, row 9
        assert service["spec"].pop("publishNotReadyAddresses") is True
    for service in [*ours.values(), *theirs.values()]:  # upstream's order: a Go map's
        service["spec"]["ports"].sort(key=lambda p: p["name"])
    found = report(theirs, ours)
    assert not found, f"tfjob's objects differ from Kubeflow's:\n{found}"
