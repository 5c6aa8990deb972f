"""Driving a table of TrainJobs through their steps, all at once, and recording what
their controller made at each step: for tests/kubernetes/trainjob/test_parity.py,
which runs the same table under Kubeflow Trainer and under tfjob and compares.

A ``Case`` is one TrainJob shape and the steps it goes through. ``run_cases`` creates
every case's TrainJob in one namespace (named ``<prefix>-<case>``), then polls the
namespace's TrainJobs and JobSets (two list calls a round) until each case has
settled at each of its steps: the step's condition holds (a step with a live JobSet:
its Jobs' counts copied into the TrainJob's status, equal to the JobSet's own) and
neither the TrainJob's status nor the JobSet (spec and status) has changed for
``SETTLE`` seconds. At a settled step it records
the JobSet, the status and the side objects (runtime snapshot, MPI hostfile and ssh
Secret, PodGroup), with the name and namespace replaced by placeholders and what
the API server sets on its own left out; then the next step's action (a resume)
is taken. The result is the same for either controller, so the two compare whole.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from testkit.controlplane import ControlPlane
from testkit.jobset import API as JOBSET_API
from testkit.parity import comparable
from testkit.trainjobs import API

NAME, NAMESPACE = "parity-job", "parity-ns"
#: How long a step's observation must hold still before it is recorded.
SETTLE = 1.5
POLL = 0.25
#: How long a case with step "idle" waits (a controller that would act has acted).
IDLE = 6.0
TIMES = ("lastTransitionTime", "lastUpdateTime")
#: Lines of a runtime snapshot's YAML that differ between two copies of one runtime.
SERVER_LINES = re.compile(r"^(\s*-?\s*(?:uid|resourceVersion|creationTimestamp|time): ).*$", re.M)
POD_GROUP_APIS = ("/apis/scheduling.x-k8s.io/v1alpha1", "/apis/scheduling.volcano.sh/v1beta1")


@dataclass(frozen=True)
class Case:
    """One TrainJob shape: its runtime, ``spec.trainer``, the rest of its spec, and
    the steps it goes through (see STEPS)."""

    name: str
    runtime: str
    trainer: dict[str, Any] | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "ClusterTrainingRuntime"
    suspend: bool = False
    deadline: int | None = None
    managed_by: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    steps: tuple[str, ...] = ("complete",)

    def manifest(self, name: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": self.kind,
                           "name": self.runtime},
        }  # fmt: skip
        optional = {
            "trainer": self.trainer,
            "runtimePatches": self.patches,
            "suspend": self.suspend or None,
            "activeDeadlineSeconds": self.deadline,
            "managedBy": self.managed_by,
        }
        spec.update({key: value for key, value in optional.items() if value})
        metadata = {"name": name, "labels": self.labels, "annotations": self.annotations}
        return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": metadata, "spec": spec}  # fmt: skip


@dataclass
class Observed:
    """A case's recorded steps: each a dict of step name, jobset, status and side objects."""

    steps: list[dict[str, Any]] = field(default_factory=list)


def node_container(jobset_spec: dict[str, Any], job: str) -> dict[str, Any]:
    """Container ``node`` of replicated Job `job` in a JobSet spec."""
    for replicated in jobset_spec["replicatedJobs"]:
        if replicated["name"] == job:
            containers = replicated["template"]["spec"]["template"]["spec"]["containers"]
            found: dict[str, Any] = next(c for c in containers if c["name"] == "node")
            return found
    raise KeyError(job)


@contextlib.contextmanager
def scratch_namespace(kube: Client, stem: str) -> Iterator[str]:
    """A fresh namespace for a module's TrainJobs, deleted afterwards (best effort)."""
    name = f"{stem}-{secrets.token_hex(3)}"
    kube.create(Namespace(metadata=ObjectMeta(name=name, labels={"tfjob-test": "true"})))
    try:
        yield name
    finally:
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, name)


def _condition(status: dict[str, Any], kind: str, value: str = "True") -> bool:
    return any(c["type"] == kind and c["status"] == value for c in status.get("conditions") or [])


def _running(status: dict[str, Any]) -> bool:
    """Every replicated Job active and ready (kwok has started all their pods)."""
    jobs = status.get("jobsStatus") or []
    return bool(jobs) and all(0 < j.get("active", 0) == j.get("ready", 0) for j in jobs)


COUNTS = ("active", "ready", "succeeded", "failed", "suspended")


def _live(status: dict[str, Any], jobset: dict[str, Any] | None) -> bool:
    """The JobSet exists and its Jobs' counts are in the TrainJob's status, as the
    JobSet has them now (a controller behind under load has not settled yet)."""
    if jobset is None or not status.get("jobsStatus"):
        return False
    mirrored = {j.get("name"): j for j in status["jobsStatus"]}
    for job in (jobset.get("status") or {}).get("replicatedJobsStatus") or []:
        copied = mirrored.get(job.get("name"))
        if copied is None or any(copied.get(c, 0) != job.get(c, 0) for c in COUNTS):
            return False
    return True


def _wound_up(status: dict[str, Any], jobset: dict[str, Any] | None) -> bool:
    """A complete JobSet's Jobs still active are deleted by JobSet's controller, a
    moment later (seconds under load): once that is in its counts and the TrainJob's."""
    if jobset is None:
        return True
    counts = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    return _live(status, jobset) and all(not j.get("active") for j in counts)


#: When a case has reached each step (the TrainJob's status, its JobSet, seconds since
#: creation).
STEPS: dict[str, Callable[[dict[str, Any], dict[str, Any] | None, float], bool]] = {
    "created": lambda status, jobset, age: _live(status, jobset),
    "running": lambda status, jobset, age: _live(status, jobset) and _running(status),
    "suspended": lambda status, jobset, age: (
        _live(status, jobset) and _condition(status, "Suspended")
    ),
    "resumed": lambda status, jobset, age: (
        _live(status, jobset) and _condition(status, "Suspended", "False") and _running(status)
    ),
    "complete": lambda status, jobset, age: (
        _condition(status, "Complete") and _wound_up(status, jobset)
    ),
    "failed": lambda status, jobset, age: _condition(status, "Failed"),
    "deadline": lambda status, jobset, age: _condition(status, "Failed"),
    "idle": lambda status, jobset, age: age >= IDLE,
}


@dataclass
class _Progress:
    case: Case
    name: str
    created: float
    observed: Observed = field(default_factory=Observed)
    fingerprint: str = ""
    since: float = 0.0

    @property
    def step(self) -> str | None:
        done = len(self.observed.steps)
        return self.case.steps[done] if done < len(self.case.steps) else None


def run_cases(
    plane: ControlPlane,
    namespace: str,
    prefix: str,
    cases: tuple[Case, ...],
    runtimes: list[dict[str, Any]],
    timeout: float = 90.0,
) -> dict[str, Observed]:
    """Every case through its steps under whichever controller runs (module docstring)."""
    for runtime in runtimes:
        manifest = {**runtime, "metadata": {**runtime["metadata"], "namespace": namespace}}
        _ok(plane.request("POST", f"{API}/namespaces/{namespace}/trainingruntimes",
                          body=manifest), 201)  # fmt: skip
    progress = []
    for case in cases:
        name = f"{prefix}-{case.name}"
        _ok(plane.request("POST", f"{API}/namespaces/{namespace}/trainjobs?fieldValidation=Strict",
                          body=case.manifest(name)), 201)  # fmt: skip
        progress.append(_Progress(case, name, time.monotonic()))
    deadline = time.monotonic() + timeout
    while any(p.step for p in progress):
        trainjobs = _by_name(plane, f"{API}/namespaces/{namespace}/trainjobs")
        jobsets = _by_name(plane, f"{JOBSET_API}/namespaces/{namespace}/jobsets")
        now = time.monotonic()
        for p in progress:
            if p.step:
                _advance(plane, namespace, p, trainjobs.get(p.name, {}), jobsets.get(p.name), now)
        if now > deadline:
            waiting = {p.name: (p.step, trainjobs.get(p.name, {}).get("status")) for p in progress
                       if p.step}  # fmt: skip
            raise AssertionError(f"cases not settled in {timeout:.0f} s: {waiting}")
        time.sleep(POLL)
    return {p.case.name: p.observed for p in progress}


def _advance(
    plane: ControlPlane,
    namespace: str,
    p: _Progress,
    trainjob: dict[str, Any],
    jobset: dict[str, Any] | None,
    now: float,
) -> None:
    """Record the case's current step once it has settled; take the next step's action."""
    status = trainjob.get("status") or {}
    step = p.step
    assert step is not None
    if not STEPS[step](status, jobset, now - p.created):
        p.fingerprint = ""
        return
    seen = jobset and {**comparable(jobset), "status": jobset.get("status")}
    fingerprint = json.dumps([status, seen], sort_keys=True)
    if fingerprint != p.fingerprint:
        p.fingerprint, p.since = fingerprint, now
        return
    if now - p.since < SETTLE:
        return
    p.observed.steps.append(_record(plane, namespace, p.name, step, status, jobset))
    p.fingerprint = ""
    if p.step == "resumed":
        path = f"{API}/namespaces/{namespace}/trainjobs/{p.name}"
        merge = {"Content-Type": "application/merge-patch+json"}
        _ok(plane.request("PATCH", path, body={"spec": {"suspend": False}}, headers=merge), 200)


def _record(
    plane: ControlPlane,
    namespace: str,
    name: str,
    step: str,
    status: dict[str, Any],
    jobset: dict[str, Any] | None,
) -> dict[str, Any]:
    """One step's objects, renamed (module docstring)."""
    kept_status = json.loads(json.dumps(status))
    for condition in kept_status.get("conditions") or []:
        for key in TIMES:
            condition.pop(key, None)
    core = f"/api/v1/namespaces/{namespace}"
    snapshot = _get(plane, f"{core}/configmaps/{name}-runtime-snapshot")
    if snapshot:
        snapshot["data"] = {k: SERVER_LINES.sub(r"\1X", v) for k, v in snapshot["data"].items()}
    recorded = {
        "step": step,
        "jobset": _kept(jobset),
        "status": kept_status,
        "snapshot": _kept(snapshot),
        "hostfile": _kept(_get(plane, f"{core}/configmaps/{name}-mpi-hostfile")),
        "secret": _secret_shape(_get(plane, f"{core}/secrets/{name}-mpi-ssh-auth")),
        "podgroups": [
            _kept(_get(plane, f"{api}/namespaces/{namespace}/podgroups/{name}"))
            for api in POD_GROUP_APIS
        ],
    }
    renamed: dict[str, Any] = json.loads(
        json.dumps(recorded).replace(namespace, NAMESPACE).replace(name, NAME)
    )
    return renamed


def _kept(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metadata and spec (or data), without what the API server sets on its own."""
    if obj is None:
        return None
    kept = comparable({**obj, "spec": obj.get("spec")})
    for key in ("data", "type", "immutable"):
        if key in obj:
            kept[key] = obj[key]
    for owner in kept["metadata"].get("ownerReferences") or []:
        owner.pop("uid", None)
    return kept


def _secret_shape(secret: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ssh Secret without its random key pair: type, keys, the keys' formats."""
    if secret is None:
        return None
    data = secret.pop("data", None) or {}
    kept = _kept(secret)
    assert kept is not None
    kept["keys"] = sorted(data)
    kept["private"] = base64.b64decode(data.get("ssh-privatekey", "")).split(b"\n")[0].decode()
    kept["public"] = base64.b64decode(data.get("ssh-publickey", "")).split(b" ")[0].decode()
    return kept


def _get(plane: ControlPlane, path: str) -> dict[str, Any] | None:
    status, body = plane.request("GET", path)
    if status == 404:
        return None
    _ok((status, body), 200)
    found: dict[str, Any] = body
    return found


def _by_name(plane: ControlPlane, path: str) -> dict[str, dict[str, Any]]:
    status, body = plane.request("GET", path)
    _ok((status, body), 200)
    return {item["metadata"]["name"]: item for item in body["items"]}


def _ok(answer: tuple[int, Any], expected: int) -> None:
    status, body = answer
    assert status == expected, f"{status}: {body}"
