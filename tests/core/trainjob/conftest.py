"""What the TrainJob core tests share: Trainer's shipped runtimes, TrainJobs, a plan.

The runtimes are read at test time from the project's copy
(`manifests/overlays/trainer-runtimes/`) when it has one, else from Kubeflow Trainer
v2.3.0's module as `go mod download` leaves it; a test needing one that neither has
is skipped, saying so."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from testkit import fast_yaml
from tfjob.api.training_runtime import TrainingRuntime, decode_runtime
from tfjob.api.trainjob import TrainJob, decode_trainjob
from tfjob.core.trainjob.plan import Observed, TrainJobPlan
from tfjob.core.trainjob.reconcile import reconcile_trainjob
from tfjob.frameworks.mlpolicy.mpi import KeyPair

REPO = Path(__file__).resolve().parents[3]
TRAINER_MODULE = Path.home() / "go/pkg/mod/github.com/kubeflow/trainer/v2@v2.3.0"
CREATED = "2026-12-01T10:00:00Z"
NOW = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
KEYS = KeyPair(
    private_pem=b"-----BEGIN EC PRIVATE KEY-----\nMIHc\n-----END EC PRIVATE KEY-----\n",
    public_authorized_key=b"ecdsa-sha2-nistp521 AAAAE2VjZHNh\n",
)


def runtime_file(name: str) -> Path | None:
    """Where the shipped runtime `name` (e.g. torch-distributed) is, if anywhere."""
    candidates = [
        REPO / "manifests/overlays/trainer-runtimes" / f"{name}.yaml",
        TRAINER_MODULE / "manifests/base/runtimes" / f"{name.replace('-', '_')}.yaml",
    ]
    return next((path for path in candidates if path.is_file()), None)


@pytest.fixture
def shipped() -> Callable[[str], TrainingRuntime]:
    def load(name: str) -> TrainingRuntime:
        path = runtime_file(name)
        if path is None:
            pytest.skip(
                f"runtime {name}: neither manifests/overlays/trainer-runtimes nor Trainer "
                f"v2.3.0's module ({TRAINER_MODULE}) is here"
            )
        return decode_runtime(fast_yaml.load(path.read_text()))

    return load


def trainjob(runtime: str = "torch-distributed", **spec: Any) -> TrainJob:
    """A TrainJob `tj` in namespace `ns`, created at CREATED, with this spec."""
    return decode_trainjob(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {
                "name": "tj",
                "namespace": "ns",
                "uid": "uid-1",
                "creationTimestamp": CREATED,
                "labels": {"team": "a"},
                "annotations": {"note": "b"},
            },
            "spec": {"runtimeRef": {"name": runtime}, **spec},
        }
    )


def runtime(
    spec: dict[str, Any], name: str = "rt", kind: str = "ClusterTrainingRuntime"
) -> TrainingRuntime:
    return decode_runtime(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def plan(
    job: TrainJob,
    rt: TrainingRuntime | None,
    observed: Observed | None = None,
    now: datetime = NOW,
) -> TrainJobPlan:
    return reconcile_trainjob(job, rt, observed or Observed(), now, KEYS)


def applied(result: TrainJobPlan, kind: str, name: str | None = None) -> dict[str, Any]:
    """The one manifest of this kind (and name) the plan writes."""
    found = [
        a.manifest
        for a in result.actions
        if hasattr(a, "manifest")
        and a.manifest["kind"] == kind
        and (name is None or a.manifest["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{kind} {name}: {len(found)} in the plan"
    return found[0]


def jobset_of(job: TrainJob, rt: TrainingRuntime) -> dict[str, Any]:
    return applied(plan(job, rt), "JobSet")


def replicated(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    return next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == name)


def node_container(jobset: dict[str, Any], job: str = "node") -> dict[str, Any]:
    pod = replicated(jobset, job)["template"]["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "node")


def env_names(container: dict[str, Any]) -> list[str]:
    return [e["name"] for e in container.get("env") or []]


def env_map(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}
