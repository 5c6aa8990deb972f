"""Small TFJobs for the node tests and the reads they need (through lightkube)."""

from __future__ import annotations

import time
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from testkit.controlplane import tfjob_resource

#: Has /bin/sh and runs as non-root: the operator's own image serves as a job image.
SHELL_IMAGE = "localhost/tfjob:0.1.0"


def shell_job(
    name: str,
    namespace: str,
    *,
    workers: int,
    script: str,
    restart_policy: str = "Never",
    clean_pod_policy: str = "None",
    image: str = SHELL_IMAGE,
    backoff_limit: int | None = None,
) -> dict[str, Any]:
    """A TFJob of `workers` Workers, each running `sh -c script`."""
    run_policy: dict[str, Any] = {"cleanPodPolicy": clean_pod_policy}
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    container = {
        "name": "tensorflow",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runPolicy": run_policy,
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": workers,
                    "restartPolicy": restart_policy,
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


def submit(kube: Client, document: dict[str, Any]) -> None:
    resource = tfjob_resource()
    kube.create(resource.from_dict(document))  # type: ignore[attr-defined]


def get_job(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    resource = tfjob_resource()
    job: dict[str, Any] = kube.get(resource, name, namespace=namespace).to_dict()  # type: ignore[attr-defined]
    return job


def finished(job: dict[str, Any]) -> bool:
    conditions = job.get("status", {}).get("conditions") or []
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conditions)


def wait_finished(kube: Client, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = get_job(kube, namespace, name)
        if finished(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(
                f"TFJob {name} not finished within {timeout:.0f} s: {job.get('status')}"
            )
        time.sleep(0.5)


def pods_of(kube: Client, namespace: str, job: str) -> list[Pod]:
    """The job's pods that are not being deleted, by name."""
    found = kube.list(Pod, namespace=namespace, labels={"training.kubeflow.org/job-name": job})
    live = [p for p in found if p.metadata is not None and p.metadata.deletionTimestamp is None]
    return sorted(live, key=lambda p: p.metadata.name)  # type: ignore[union-attr, arg-type, return-value]
