"""A test's TrainJobs and what they become (JobSet, Jobs, pods), through the raw API.

Whoever reconciles them (Kubeflow Trainer, testkit/trainer.py, or tfjob), a test
writes a TrainJob as a user does and reads back every object as stored. The pods of
a TrainJob come from Jobs, so a test cannot annotate them one by one before they
start: ``ending()`` puts the kwok annotations (testkit/cluster.py) on the pod
template through the TrainJob's ``spec.runtimePatches``, the field meant for
per-manager changes of the runtime's template, so every pod ends as told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION
from testkit.controlplane import ControlPlane
from testkit.helpers import wait_for
from testkit.jobset import API as JOBSET_API
from testkit.jobset import JOBSET_NAME_LABEL

API = "/apis/trainer.kubeflow.org/v1alpha1"
#: The runtimePatches manager under which the tests' kwok annotations go.
PATCH_MANAGER = "kwok.tfjob.test/pods"
#: The replicated Job of Trainer's runtimes that runs the trainer (container "node").
TRAINER_JOB = "node"


def ending(exit_code: int, run_for: str | None = None, job: str = TRAINER_JOB) -> dict[str, Any]:
    """A runtime patch that makes every pod of replicated Job `job` exit with
    `exit_code` (after `run_for`, a Go duration, if given) once kwok runs it."""
    annotations = {EXIT_CODE_ANNOTATION: str(exit_code)}
    if run_for:
        annotations[RUN_FOR_ANNOTATION] = run_for
    pod = {"metadata": {"annotations": annotations}}
    replicated = {"name": job, "template": {"spec": {"template": pod}}}
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated]}}},
    }


def trainjob(
    name: str,
    runtime: str = "torch-distributed",
    *,
    kind: str = "ClusterTrainingRuntime",
    num_nodes: int | None = None,
    patches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A TrainJob of `runtime` (a ClusterTrainingRuntime unless `kind` says
    TrainingRuntime), with ``spec.trainer.numNodes`` when given."""
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": kind, "name": runtime}
    }
    if num_nodes is not None:
        spec["trainer"] = {"numNodes": num_nodes}
    if patches:
        spec["runtimePatches"] = patches
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": spec,
    }


@dataclass
class TrainJobs:
    """The TrainJobs of one test's namespace and the objects made for them."""

    plane: ControlPlane
    namespace: str

    @property
    def path(self) -> str:
        return f"{API}/namespaces/{self.namespace}/trainjobs"

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        status, body = self.plane.request(
            "POST", f"{self.path}?fieldValidation=Strict", body=manifest
        )
        assert status == 201, f"create TrainJob {manifest['metadata']['name']}: {status} {body}"
        created: dict[str, Any] = body
        return created

    def create_runtime(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """A TrainingRuntime in this namespace."""
        path = f"{API}/namespaces/{self.namespace}/trainingruntimes?fieldValidation=Strict"
        status, body = self.plane.request("POST", path, body=manifest)
        assert status == 201, f"create TrainingRuntime: {status} {body}"
        created: dict[str, Any] = body
        return created

    def get(self, name: str) -> dict[str, Any]:
        status, body = self.plane.request("GET", f"{self.path}/{name}")
        assert status == 200, f"GET TrainJob {name}: {status} {body}"
        found: dict[str, Any] = body
        return found

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        """The TrainJob's condition `kind` when it is True, else None."""
        for entry in (self.get(name).get("status") or {}).get("conditions") or []:
            if entry["type"] == kind and entry["status"] == "True":
                found: dict[str, Any] = entry
                return found
        return None

    def wait_condition(self, name: str, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        return wait_for(
            lambda: self.condition(name, kind),
            timeout,
            interval=0.1,
            message=f"{kind}=True on TrainJob {name}",
        )

    def wait_finished(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        """The TrainJob's Complete or Failed condition, whichever is True first: a
        test expecting one sees the other at once, with its reason and message."""

        def finished() -> dict[str, Any] | None:
            return self.condition(name, "Complete") or self.condition(name, "Failed")

        return wait_for(finished, timeout, interval=0.1, message=f"TrainJob {name} to finish")

    def jobset(self, name: str) -> dict[str, Any] | None:
        """The JobSet of that name in this namespace (a TrainJob's has its name)."""
        status, body = self.plane.request(
            "GET", f"{JOBSET_API}/namespaces/{self.namespace}/jobsets/{name}"
        )
        if status == 404:
            return None
        assert status == 200, f"GET JobSet {name}: {status} {body}"
        found: dict[str, Any] = body
        return found

    def jobs(self, name: str) -> list[dict[str, Any]]:
        """The Jobs of JobSet `name`."""
        return self._list("/apis/batch/v1", "jobs", name)

    def pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of JobSet `name`'s Jobs."""
        return self._list("/api/v1", "pods", name)

    def _list(self, api: str, resource: str, name: str) -> list[dict[str, Any]]:
        status, body = self.plane.request(
            "GET",
            f"{api}/namespaces/{self.namespace}/{resource}?labelSelector={JOBSET_NAME_LABEL}={name}",
        )
        assert status == 200, body
        items: list[dict[str, Any]] = sorted(body["items"], key=lambda o: o["metadata"]["name"])
        return items
