"""Parity: one TrainJob under Kubeflow Trainer v2.3.0's controller, then the same one
under tfjob's, gives the same JobSet spec and the same TrainJob status.

Both run against the real JobSet controller on kwok nodes, one after the other in
one namespace (Trainer is stopped, its webhooks removed, before tfjob's operator
starts, so each TrainJob has one controller). The two TrainJobs differ only in their
names, which are replaced by one placeholder on both sides; what the API server sets
on its own (uids, resourceVersions, timestamps, managedFields) is left out, as in
the v1 parity tests (testkit/parity.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from lightkube import Client

from testkit import trainjob_api
from testkit.cluster import Nodes
from testkit.controlplane import ControlPlane, ControlPlaneUnavailable
from testkit.helpers import wait_for
from testkit.jobset import JobSetManager
from testkit.operators import Operators
from testkit.parity import comparable, differences
from testkit.trainer import TrainerManager
from testkit.trainjobs import TrainJobs, ending, trainjob

PLACEHOLDER = "parity-job"
TIMES = ("lastTransitionTime", "lastUpdateTime")


def _renamed(obj: Any, name: str) -> Any:  # the same shape as `obj`
    """`obj` with every occurrence of `name` (in names, env values, hosts) replaced."""
    return json.loads(json.dumps(obj).replace(name, PLACEHOLDER))


def _jobset(trainjobs: TrainJobs, name: str) -> dict[str, Any]:
    jobset = trainjobs.jobset(name)
    assert jobset is not None, f"no JobSet {name}"
    kept = comparable(jobset)
    for owner in kept["metadata"].get("ownerReferences") or []:
        owner.pop("uid", None)
    renamed: dict[str, Any] = _renamed(kept, name)
    return renamed


def _status(trainjobs: TrainJobs, name: str) -> dict[str, Any]:
    status = trainjobs.get(name).get("status") or {}
    for condition in status.get("conditions") or []:
        for key in TIMES:
            condition.pop(key, None)
    renamed: dict[str, Any] = _renamed(status, name)
    return renamed


def _run(trainjobs: TrainJobs, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    trainjobs.create(trainjob(name, "torch-distributed", num_nodes=2, patches=[ending(0)]))
    finished = trainjobs.wait_finished(name, timeout=60)
    assert finished["type"] == "Complete", finished
    return _jobset(trainjobs, name), _status(trainjobs, name)


@pytest.fixture(scope="module")
def trainer_api(jobset: JobSetManager, control_plane: ControlPlane, kube: Client) -> None:
    """Trainer's API for tfjob (testkit/trainjob_api.py)."""
    try:
        trainjob_api.install(control_plane, kube)
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no Trainer runtimes: {exc}")


@pytest.mark.usefixtures("trainer_api")
def test_a_torch_trainjob_under_trainer_and_under_tfjob(
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    trainjobs: TrainJobs,
    nodes: Nodes,
) -> None:
    nodes.add(1)
    try:
        binary = control_plane.assets.tool("trainer-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no Kubeflow Trainer: {exc}")
    with TrainerManager(control_plane, kube, binary):
        theirs = _run(trainjobs, "by-trainer")
    operators.start("--enable-scheme=trainjob")
    ours = _run(trainjobs, "by-tfjob")
    assert [j["name"] for j in theirs[0]["spec"]["replicatedJobs"]] == ["node"]
    assert {c["type"] for c in theirs[1]["conditions"]} == {"Complete"}
    assert theirs[1]["jobsStatus"], theirs[1]
    found = differences(theirs[0], ours[0], "jobset") + differences(theirs[1], ours[1], "status")
    assert not found, "\n".join(found)


@pytest.mark.usefixtures("trainer_api")
def test_a_suspended_trainjob_under_trainer_and_under_tfjob(
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    trainjobs: TrainJobs,
) -> None:
    """Suspended: the suspended JobSet and the Suspended condition."""
    try:
        binary = control_plane.assets.tool("trainer-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no Kubeflow Trainer: {exc}")
    with TrainerManager(control_plane, kube, binary):
        theirs = _suspended(trainjobs, "held-by-trainer")
    operators.start("--enable-scheme=trainjob")
    ours = _suspended(trainjobs, "held-by-tfjob")
    assert theirs[0]["spec"]["suspend"] is True
    assert [c["reason"] for c in theirs[1]["conditions"]] == ["Suspended"]
    found = differences(theirs[0], ours[0], "jobset") + differences(theirs[1], ours[1], "status")
    assert not found, "\n".join(found)


def _suspended(trainjobs: TrainJobs, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    manifest = trainjob(name, "torch-distributed", num_nodes=2)
    manifest["spec"]["suspend"] = True
    trainjobs.create(manifest)
    trainjobs.wait_condition(name, "Suspended")
    wait_for(lambda: trainjobs.jobset(name), 30, message=f"JobSet {name}")
    return _jobset(trainjobs, name), _status(trainjobs, name)


@pytest.mark.usefixtures("trainer_api")
def test_an_mpi_trainjob_under_trainer_and_under_tfjob(
    jobset: JobSetManager,
    control_plane: ControlPlane,
    kube: Client,
    operators: Operators,
    trainjobs: TrainJobs,
) -> None:
    """deepspeed-distributed: the JobSet, the hostfile, and the ssh Secret's type and
    key formats (the keys themselves are random)."""
    try:
        binary = control_plane.assets.tool("trainer-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no Kubeflow Trainer: {exc}")
    with TrainerManager(control_plane, kube, binary):
        theirs = _mpi(trainjobs, "mpi-by-trainer")
    operators.start("--enable-scheme=trainjob")
    ours = _mpi(trainjobs, "mpi-by-tfjob")
    assert "mpi-hostfile" in json.dumps(theirs[0]["spec"])  # the launcher mounts it
    found = [d for a, b, what in zip(theirs, ours, ("jobset", "hostfile", "secret"), strict=True)
             for d in differences(a, b, what)]  # fmt: skip
    assert not found, "\n".join(found)


def _mpi(trainjobs: TrainJobs, name: str) -> tuple[dict[str, Any], ...]:
    trainjobs.create(trainjob(name, "deepspeed-distributed", num_nodes=2))
    wait_for(lambda: trainjobs.jobset(name), 30, message=f"JobSet {name}")
    hostfile = _get(trainjobs, "configmaps", f"{name}-mpi-hostfile")
    secret = _get(trainjobs, "secrets", f"{name}-mpi-ssh-auth")
    data = secret.get("data") or {}
    shape = {
        "type": secret.get("type"),
        "immutable": secret.get("immutable"),
        "keys": sorted(data),
        "private": base64.b64decode(data.get("ssh-privatekey", "")).split(b"\n")[0].decode(),
        "public": base64.b64decode(data.get("ssh-publickey", "")).split(b" ")[0].decode(),
        "owner": _renamed(secret["metadata"].get("ownerReferences"), name),
    }
    for owner in shape["owner"] or []:
        owner.pop("uid", None)
    return _jobset(trainjobs, name), _renamed(comparable_data(hostfile), name), shape


def comparable_data(obj: dict[str, Any]) -> dict[str, Any]:
    kept = {"data": obj.get("data"), "owner": obj["metadata"].get("ownerReferences")}
    for owner in kept["owner"] or []:
        owner.pop("uid", None)
    return kept


def _get(trainjobs: TrainJobs, plural: str, name: str) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{trainjobs.namespace}/{plural}/{name}"
    found: dict[str, Any] = wait_for(
        lambda: (lambda r: r[1] if r[0] == 200 else None)(trainjobs.plane.request("GET", path)),
        30,
        message=f"{plural} {name}",
    )
    return found
