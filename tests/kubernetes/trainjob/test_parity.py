"""Parity: the same TrainJobs under Kubeflow Trainer v2.3.0's controller and under
tfjob's give the same JobSet, side objects and TrainJob status, step by step.

One table (CASES) of TrainJob shapes covers every runtime Trainer ships and the parts
of a TrainJob that reach its JobSet; each case walks through steps (created, running,
suspended, resumed, Complete, Failed, deadline). All cases run at once: first under
Trainer (in one namespace), then, Trainer stopped and its webhooks gone, under tfjob's
operator (in another); at each settled step both sides' objects are recorded, then
one test per case compares them (testkit/trainjob_parity.py does the driving). What
the API server sets on its own is left out, the TrainJob's name and namespace become
placeholders, and only tfjob's documented deviations (docs/decisions/0031) are
normalised, each by name below.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit.cluster import Cluster, Nodes
from testkit.controlplane import ControlPlane, ControlPlaneUnavailable
from testkit.jobset import JobSetManager
from testkit.operators import Operators
from testkit.parity import differences
from testkit.trainer import TrainerManager
from testkit.trainjob_fixtures import install_trainer_api, unavailable
from testkit.trainjob_parity import Case, Observed, node_container, run_cases, scratch_namespace
from testkit.trainjobs import ending

RUNNING_LONG = ending(0, run_for="1h")


def _trainer(**fields: Any) -> dict[str, Any]:
    """A full ``spec.trainer``: image, command, args, env, two nodes, resources."""
    base: dict[str, Any] = {
        "image": "example.test/train:1",
        "command": ["python3"],
        "args": ["train.py", "--epochs=1"],
        "env": [{"name": "USER_SETTING", "value": "on"}],
        "numNodes": 2,
        "resourcesPerNode": {"requests": {"cpu": "500m", "memory": "256Mi"}},
    }
    return {**base, **fields}


def _patch(manager: str, label: str, selector: dict[str, str]) -> dict[str, Any]:
    """A runtimePatch of `manager`: a JobSet label and annotation, a pod label and a
    nodeSelector on the trainer's Job."""
    pod = {"metadata": {"labels": {label: "pod"}}, "spec": {"nodeSelector": selector}}
    job = {"name": "node", "template": {"spec": {"template": pod}}}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {label: "yes"}, "annotations": {label: manager}},
                "spec": {"replicatedJobs": [job]},
            }
        },
    }


CASES = (
    # Every shipped runtime, with everything spec.trainer can say, run to Complete.
    Case("torch", "torch-distributed", _trainer(numProcPerNode=2), patches=[ending(0)]),
    Case("deepspeed", "deepspeed-distributed", _trainer(numProcPerNode=2),
         patches=[ending(0, job="launcher")]),
    Case("mlx", "mlx-distributed", _trainer(), patches=[ending(0, job="launcher")]),
    Case("jax", "jax-distributed", _trainer(), patches=[ending(0)]),
    Case("xgboost", "xgboost-distributed", _trainer(), patches=[ending(0)]),
    # torch's numProcPerNode rules: the CPU request, GPUs ("auto"); then Failed.
    Case("torch-cpu", "torch-distributed",
         _trainer(resourcesPerNode={"requests": {"cpu": "3"}}), patches=[RUNNING_LONG],
         steps=("running",)),
    Case("torch-gpu", "torch-distributed",
         _trainer(resourcesPerNode={"limits": {"nvidia.com/gpu": "2"}}), steps=("created",)),
    Case("torch-fails", "torch-once", {"numNodes": 1}, kind="TrainingRuntime",
         patches=[ending(1)], steps=("failed",)),
    Case("xgboost-gpu", "xgboost-distributed",
         _trainer(resourcesPerNode={"limits": {"nvidia.com/gpu": "2"}}), steps=("created",)),
    Case("torch-bare", "torch-distributed", steps=("created",)),
    # suspend, resume (MPI too: its hostfile and Secret at each step); the deadline;
    # managedBy another controller.
    Case("resumed", "torch-distributed", _trainer(), patches=[RUNNING_LONG], suspend=True,
         steps=("suspended", "resumed")),
    Case("mpi-resumed", "deepspeed-distributed", _trainer(), suspend=True,
         steps=("suspended", "resumed")),
    Case("deadline", "torch-distributed", _trainer(), deadline=8, steps=("deadline",),
         patches=[_patch("c.example.test/pending", "pending.example.test/set", {"none": "x"})]),
    Case("elsewhere", "torch-distributed", _trainer(), managed_by="kueue.x-k8s.io/multikueue",
         steps=("idle",)),
    # Two managers' runtimePatches; the TrainJob's own labels and annotations.
    Case("patched", "torch-distributed", _trainer(),
         patches=[_patch("a.example.test/one", "one.example.test/set", {"zone": "a"}),
                  _patch("b.example.test/two", "two.example.test/set", {"rack": "b"})],
         labels={"team": "ml"}, annotations={"note": "kept"}, steps=("created",)),
    # podGroupPolicy: coscheduling's and Volcano's PodGroup (namespaced runtimes).
    Case("cosched", "torch-coscheduling", _trainer(), kind="TrainingRuntime",
         steps=("created",)),
    Case("volcano", "torch-volcano", _trainer(), kind="TrainingRuntime", steps=("created",)),
)  # fmt: skip

#: The namespaced TrainingRuntimes some cases name: torch-distributed with a
#: podGroupPolicy, or with a Job that fails at its pod's first failure.
DERIVED = {
    "torch-coscheduling": {"podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 120}}},
    "torch-volcano": {"podGroupPolicy": {"volcano": {}}},
    "torch-once": {},
}


def _runtimes(shipped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    torch = next(r for r in shipped if r["metadata"]["name"] == "torch-distributed")
    made = []
    for name, spec in DERIVED.items():
        runtime = copy.deepcopy(torch)
        runtime["kind"] = "TrainingRuntime"
        runtime["metadata"] = {"name": name, "labels": torch["metadata"]["labels"]}
        runtime["spec"].update(spec)
        made.append(runtime)
    made[-1]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "backoffLimit"
    ] = 0
    return made


# -- tfjob's deliberate deviations (docs/decisions/0031-trainjob-core.md), by name ----


def deviation_3_env_without_trainer(case: Case, ours: Observed) -> None:
    """Without ``spec.trainer`` tfjob still writes torch's PET_* env and port 29500;
    Trainer writes neither. Take them off tfjob's side."""
    if case.trainer is not None or case.runtime != "torch-distributed":
        return
    for step in ours.steps:
        if step.get("jobset"):
            container = node_container(step["jobset"]["spec"], "node")
            env = [e for e in container.pop("env", []) if not e["name"].startswith("PET_")]
            ports = [p for p in container.pop("ports", []) if p.get("containerPort") != 29500]
            container.update({"env": env} if env else {})
            container.update({"ports": ports} if ports else {})


def deviation_4_launcher_as_node_image(
    case: Case, ours: Observed, shipped: dict[str, dict[str, Any]]
) -> None:
    """With runLauncherAsNode the TrainJob's image reaches the node Job too; Trainer
    leaves it on the runtime's image. Put the runtime's image back on tfjob's side."""
    runtime = shipped.get(case.runtime, {})
    if not (runtime.get("spec", {}).get("mlPolicy", {}).get("mpi") or {}).get("runLauncherAsNode"):
        return
    if not (case.trainer or {}).get("image"):
        return
    image = node_container(runtime["spec"]["template"]["spec"], "node")["image"]
    for step in ours.steps:
        if step.get("jobset"):
            node_container(step["jobset"]["spec"], "node")["image"] = image


def deviation_6_xgboost_env_order(case: Case, observed: Observed) -> None:
    """xgboost's env order is fixed in tfjob; Trainer's follows Go's map order at its
    start. Compare the trainer's env as a set on both sides."""
    if case.runtime != "xgboost-distributed":
        return
    for step in observed.steps:
        if step.get("jobset"):
            container = node_container(step["jobset"]["spec"], "node")
            container["env"] = sorted(container.get("env") or [], key=lambda e: e["name"])


def race_deadline_jobs_status(case: Case, observed: Observed) -> None:
    """Not a deviation, a race: at the deadline both controllers copy the JobSet's
    replicated-job counts as the JobSet has them then, and whether JobSet's controller
    has written its first counts before an 8 s deadline depends on the machine's load
    (seen both ways, under each controller). The deadline step's jobsStatus is left out
    on both sides; its conditions are compared."""
    for step in observed.steps:
        if step["step"] == "deadline":
            step["status"].pop("jobsStatus", None)


# -- running both ------------------------------------------------------------------


@pytest.fixture(scope="module")
def observed(
    jobset: JobSetManager,
    cluster: Cluster,
    control_plane: ControlPlane,
    kube: Client,
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Observed], dict[str, Observed], dict[str, dict[str, Any]]]]:
    """Every case under Trainer, then under tfjob: (Trainer's, tfjob's, shipped runtimes)."""
    shipped = install_trainer_api(control_plane, kube)
    try:
        binary = control_plane.assets.tool("trainer-controller-manager")
    except ControlPlaneUnavailable as exc:
        unavailable("Kubeflow Trainer", exc)
    runtimes = _runtimes(shipped)
    with (
        scratch_namespace(kube, "parity-kf") as theirs_ns,
        scratch_namespace(kube, "parity-tf") as ours_ns,
    ):
        nodes = Nodes(kube, theirs_ns)
        nodes.add(2, cpu="64", memory="256Gi")
        try:
            with TrainerManager(control_plane, kube, binary):
                theirs = run_cases(control_plane, theirs_ns, "pk", CASES, runtimes)
            operators = Operators(operator_kubeconfig, ours_ns, tmp_path_factory.mktemp("op"))
            operators.start("--enable-scheme=trainjob")
            try:
                ours = run_cases(control_plane, ours_ns, "pt", CASES, runtimes)
            finally:
                for running in operators.started:
                    running.stop()
        finally:
            nodes.remove_all()
    yield theirs, ours, {r["metadata"]["name"]: r for r in shipped}


#: The side objects Trainer makes beside a case's JobSet (all cases: the snapshot).
SIDE_OBJECTS = {
    "deepspeed": {"snapshot", "hostfile", "secret"},
    "mpi-resumed": {"snapshot", "hostfile", "secret"},
    "mlx": {"snapshot", "hostfile", "secret"},
    "cosched": {"snapshot", "podgroup"},
    "volcano": {"snapshot", "podgroup"},
    "elsewhere": set(),
}


def _side_objects(observed: Observed) -> set[str]:
    last = observed.steps[-1]
    made = {key for key in ("snapshot", "hostfile", "secret") if last[key]}
    return made | ({"podgroup"} if any(last["podgroups"]) else set())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_trainjob_under_trainer_and_under_tfjob(
    case: Case,
    observed: tuple[dict[str, Observed], dict[str, Observed], dict[str, dict[str, Any]]],
) -> None:
    """At every step: the JobSet (or its absence), the TrainJob's status, the runtime
    snapshot, the MPI hostfile and ssh Secret (type, keys, key formats) and the
    PodGroup are the same under both controllers."""
    theirs, ours = observed[0][case.name], observed[1][case.name]
    assert [s["step"] for s in theirs.steps] == list(case.steps)
    assert [s["jobset"] is not None for s in theirs.steps] == [
        step not in ("deadline", "idle") for step in case.steps
    ], "Trainer's JobSet is not where the step says"
    assert _side_objects(theirs) == SIDE_OBJECTS.get(case.name, {"snapshot"})
    deviation_3_env_without_trainer(case, ours)
    deviation_4_launcher_as_node_image(case, ours, observed[2])
    for side in (theirs, ours):
        deviation_6_xgboost_env_order(case, side)
        race_deadline_jobs_status(case, side)
    found = [
        d
        for a, b in zip(theirs.steps, ours.steps, strict=True)
        for d in differences(a, b, a["step"])
    ]
    assert not found, "\n".join(found)
