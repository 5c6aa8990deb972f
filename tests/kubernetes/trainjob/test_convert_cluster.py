"""`tfjob convert` on the test cluster: one example of each v1 kind and its conversion
run side by side under tfjob's operator (every v1 kind and TrainJob), with the real
JobSet and Job controllers and kwok as the kubelet.

kwok runs no program, so "the same result" here is what a cluster shows: the v1 job
reaches Succeeded and the TrainJob Complete when their pods end (each template
annotated for kwok to end it with exit code 0); the pods have the same shape (per
v1 replica type, a replicated Job of as many pods, or the trainer's nodes on a
shipped runtime, master first); and each pod's training container runs the same
image, command, args and working directory with the env its framework reads, each
value as the kubelet expands it (the completion index from the downward API,
`$(VAR)` references), every v1 pod address read as the JobSet pod it became
(tests/core/test_convert.py checks the same on the JobSet the core plans; this is
the JobSet the real controllers made pods of). What `tfjob convert` names lost is
left out of the env comparison, except for the MPIJob, compared whole. Every job runs
at once, in one namespace.

An MPIJob's TrainJob (an MPI runtime: core/convert/mpi.py) reaches its workers over
ssh where the v1 launcher uses kubexec.sh: its launcher has the v1 launcher's env but
for the variables naming kubexec.sh (not set: ssh is the default) and with the MPI
runtime's own; its workers run sshd where v1's sleep; the hostfile ConfigMap lists
the v1 hostfile's workers as their JobSet pods, with the same slots, mounted at
/etc/mpi/hostfile on the launcher, and the ssh key Secret is mounted on every pod.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client

from testkit.cluster import Nodes
from testkit.controlplane import ControlPlane
from testkit.helpers import wait_for
from testkit.jobset import JobSetManager
from testkit.operators import Operators
from testkit.trainjob_fixtures import install_trainer_api
from testkit.trainjobs import TrainJobs
from tests.core.test_convert import (
    MPI_KUBEXEC_ENV,
    as_converted,
    expand,
    expected_value,
    where_each_pod_goes,
)
from tfjob.core.convert import convert
from tfjob.frameworks.load import load_jobs

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = [
    "examples/tensorflow/parameter_server.yaml",
    "examples/pytorch/ddp.yaml",
    "examples/jax/job.yaml",
    "examples/xgboost/job.yaml",
    "examples/paddle/job.yaml",
    "examples/mpi/job.yaml",
]
EXIT_CODE, RUN_FOR = "kwok.tfjob.test/exit-code", "kwok.tfjob.test/run-for"
INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_PATH = f"metadata.annotations['{INDEX}']"
SCHEMES = ("tfjob", "pytorchjob", "jaxjob", "xgboostjob", "paddlejob", "mpijob", "trainjob")
V1_TYPE, V1_INDEX = "training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index"
RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
#: The v1 kinds' rendezvous ports a node runtime replaces by its own (29500).
V1_PORTS = {"2222", "23456", "6666", "9999", "36543"}


@pytest.fixture
def served(
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    pytorchjob_crd_installed: None,
    kind_crds_installed: None,
) -> None:
    install_trainer_api(control_plane, kube)
    operators.start(*(f"--enable-scheme={s}" for s in SCHEMES))


def ending_on_kwok(document: dict[str, Any]) -> dict[str, Any]:
    """The v1 job with every pod template annotated for kwok to end it with 0, after
    10 s of running (so that every pod is seen before any job ends)."""
    job = copy.deepcopy(document)
    spec_field = next(k for k in job["spec"] if k.endswith("ReplicaSpecs"))
    for replica in job["spec"][spec_field].values():
        metadata = replica["template"].setdefault("metadata", {})
        annotations = metadata.setdefault("annotations", {})
        annotations.update({EXIT_CODE: "0", RUN_FOR: "10s"})
    return job


def v1_path(plane_namespace: str, kind: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{plane_namespace}/{kind.lower()}s"


@pytest.mark.usefixtures("served")
def test_each_kinds_conversion_ends_as_the_v1_job_with_the_same_pods(
    control_plane: ControlPlane, trainjobs: TrainJobs, nodes: Nodes, namespace: str
) -> None:
    nodes.add(1, cpu="32", ephemeral_storage="100Gi")  # room for every pod at once
    started = []
    for example in EXAMPLES:
        [document] = list(yaml.safe_load_all((REPO / example).read_text()))
        document = ending_on_kwok(document)
        document["metadata"]["namespace"] = namespace
        [job] = load_jobs(yaml.safe_dump(document), example, require_image=True)
        conversion = convert(job)
        status, body = control_plane.request(
            "POST", v1_path(namespace, job.kind) + "?fieldValidation=Strict", body=document
        )
        assert status == 201, f"{example}: {status} {body}"
        if conversion.runtime is not None:
            trainjobs.create_runtime(conversion.runtime)
        trainjobs.create(conversion.trainjob)
        started.append((example, job, conversion))
    # Every pod of every job, seen while they run (a JobSet done, or cleanPodPolicy
    # Running, deletes some at the end): each list is kept once it is whole.
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def whole() -> bool:
        for example, job, _ in started:
            name = job.metadata.name
            pods = sum(spec.replicas or 0 for spec in job.spec.replica_specs.values())
            for side, found in (
                ("v1", lambda name=name: _v1_pods(control_plane, namespace, name)),
                ("new", lambda name=name: trainjobs.pods(name)),
            ):
                if (example, side) not in seen and len(listed := found()) == pods:
                    seen[(example, side)] = listed
        return len(seen) == 2 * len(started)

    wait_for(whole, 60, message="every pod of every job, at once")
    for example, job, conversion in started:
        name, kind = job.metadata.name, job.kind
        finished = trainjobs.wait_finished(name, timeout=90)
        assert finished["type"] == "Complete", (example, finished)
        wait_for(
            lambda kind=kind, name=name: _succeeded(control_plane, namespace, kind, name),
            60,
            message=f"{example}: the {kind} Succeeded",
        )
        _same_pods(
            example, job, conversion, seen[(example, "v1")], seen[(example, "new")], trainjobs
        )
        if kind == "MPIJob":
            _same_mpi_parts(control_plane, namespace, job, seen[(example, "new")])


def _full(pods: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    return pods if len(pods) == count else None


def _v1_pods(plane: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    selector = f"training.kubeflow.org/job-name={name}"
    path = f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
    status, body = plane.request("GET", path)
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


def _succeeded(plane: ControlPlane, namespace: str, kind: str, name: str) -> bool:
    status, body = plane.request("GET", f"{v1_path(namespace, kind)}/{name}")
    assert status == 200, body
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)


def _same_pods(
    example: str,
    job: Any,
    conversion: Any,
    v1_pods: list[dict[str, Any]],
    new_pods: list[dict[str, Any]],
    trainjobs: TrainJobs,
) -> None:
    name = job.metadata.name
    v1 = {
        (p["metadata"]["labels"][V1_TYPE], int(p["metadata"]["labels"].get(V1_INDEX, 0))): p
        for p in v1_pods
    }
    new = {
        (p["metadata"]["labels"][RJOB], int(p["metadata"]["annotations"][INDEX])): p
        for p in new_pods
    }
    jobset = trainjobs.jobset(name)
    assert jobset is not None
    where = where_each_pod_goes(job, jobset)
    # The shape: every v1 pod has its JobSet pod, and there is no other.
    assert sorted(where) == sorted(v1), example
    assert sorted(where.values()) == sorted(new), example
    lost = {m[1] for loss in conversion.losses if (m := re.search(r"env\[(\w+)\]", loss.path))}
    node = any(rjob == "node" for rjob, _ in where.values())
    for (t, i), pod in v1.items():
        rjob, k = where[(t, i)]
        own = f"{name}-{rjob}-0-{k}.{name}"
        old = _training_container(pod)
        got = _expanded_env(new[(rjob, k)], k, old["name"])
        container = got.pop("")
        old = as_converted(job, t, old)
        for key in ("image", "command", "args", "workingDir"):
            assert container.get(key) == old.get(key), (example, t, i, key)
        if job.kind == "MPIJob":
            assert not set(MPI_KUBEXEC_ENV) & set(got), (example, t, i)
        for var in old.get("env") or []:
            if var["name"] in lost and job.kind != "MPIJob":
                continue
            want = dict(var)
            if "value" in want:
                want["value"] = expected_value(want["value"], job, where, own)
                if node and var["name"].endswith("_PORT") and want["value"] in V1_PORTS:
                    want["value"] = "29500"
            assert got.get(var["name"]) == want, (example, t, i, var["name"])


def _same_mpi_parts(
    plane: ControlPlane, namespace: str, job: Any, new_pods: list[dict[str, Any]]
) -> None:
    """The hostfile lists the v1 hostfile's workers as the JobSet pods they became,
    with the same slots, and is mounted on the launcher; the ssh key Secret is made and
    mounted on every pod at the runtime's sshAuthMountPath."""
    name = job.metadata.name
    status, v1_config = plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}-config"
    )
    assert status == 200, v1_config
    want = re.sub(
        rf"\b{name}-worker-(\d+)\b", rf"{name}-node-0-\1.{name}", v1_config["data"]["hostfile"]
    )
    status, hostfile = plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}-mpi-hostfile"
    )
    assert status == 200, hostfile
    assert hostfile["data"]["hostfile"] == want
    status, secret = plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}-mpi-ssh-auth"
    )
    assert status == 200, secret
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
    for pod in new_pods:
        rjob = pod["metadata"]["labels"][RJOB]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["mpi-ssh-auth"]["secret"]["secretName"] == f"{name}-mpi-ssh-auth"
        [node] = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        mounts = {m["mountPath"]: m["name"] for m in node["volumeMounts"]}
        assert mounts["/home/mpiuser/.ssh"] == "mpi-ssh-auth", rjob
        if rjob == "launcher":
            assert volumes["mpi-hostfile"]["configMap"]["name"] == f"{name}-mpi-hostfile"
            assert mounts["/etc/mpi"] == "mpi-hostfile"


def _training_container(pod: dict[str, Any]) -> dict[str, Any]:
    names = ("tensorflow", "pytorch", "jax", "xgboost", "paddle", "mpi")
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] in names)
    return found


def _expanded_env(pod: dict[str, Any], index: int, v1_name: str) -> dict[str, Any]:
    """The training container's env by name, as the kubelet gives it (the index
    resolved, `$(V)` expanded); the container itself under ""."""
    container = next(c for c in pod["spec"]["containers"] if c["name"] in ("node", v1_name))
    known: dict[str, str] = {}
    env: dict[str, Any] = {"": container}
    for var in copy.deepcopy(container.get("env") or []):
        ref = (var.get("valueFrom") or {}).get("fieldRef") or {}
        if ref.get("fieldPath") == INDEX_PATH:
            var = {"name": var["name"], "value": str(index)}
        elif "value" in var:
            var["value"] = expand(var["value"], known)
        if "value" in var:
            known[var["name"]] = var["value"]
        env[var["name"]] = var
    return env
