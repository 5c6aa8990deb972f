"""Faults a real node produces, under the operator installed from its image: a
container killed by a signal (exit code 137, retryable under restartPolicy ExitCode)
and a pod the kubelet evicts (its ephemeral-storage limit exceeded). Both times the
operator replaces the pod, as upstream does for a failed pod with a retryable exit
code, and the job still succeeds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

from testkit.node import Node
from tests.node.jobs import get_job, pods_of, shell_job, submit, wait_finished


def running_pod(kube: Client, namespace: str, job: str, timeout: float = 120) -> Pod:
    deadline = time.monotonic() + timeout
    while True:
        pods = pods_of(kube, namespace, job)
        if len(pods) == 1 and pods[0].status and pods[0].status.phase == "Running":
            statuses = pods[0].status.containerStatuses or []
            if statuses and statuses[0].state and statuses[0].state.running:
                return pods[0]
        assert time.monotonic() < deadline, f"no Running pod of {job}: {pods}"
        time.sleep(0.3)


def events(kube: Client, namespace: str) -> list[tuple[str, str]]:
    return [(e.reason or "", e.message or "") for e in kube.list(Event, namespace=namespace)]


def shared_folder(node: Node, name: str) -> Path:
    """A node folder pods of every incarnation mount (hostPath), writable by any user."""
    folder = node.folder / name  # type: ignore[operator]
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    return folder


def with_folder(document: dict[str, Any], folder: Path) -> dict[str, Any]:
    spec = document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["volumes"] = [{"name": "shared", "hostPath": {"path": str(folder)}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
    return document


@pytest.mark.timeout(1200)
def test_a_container_killed_by_a_signal_is_restarted_by_policy_and_the_job_succeeds(
    node: Node, kube: Client, installed_operator: dict[str, Any], namespace: str
) -> None:
    folder = shared_folder(node, f"killed-{namespace}")
    script = "echo started >> /shared/runs; sleep 15; echo finished; echo done >> /shared/runs"
    submit(
        kube,
        with_folder(
            shell_job("killed", namespace, workers=1, restart_policy="ExitCode", script=script),
            folder,
        ),
    )
    first = running_pod(kube, namespace, "killed")
    assert first.status is not None and first.metadata is not None
    container_id = (first.status.containerStatuses or [])[0].containerID or ""
    assert container_id.startswith("containerd://")
    # What the OOM killer or `kill -9` does: SIGKILL to the container's process.
    node.ctr("tasks", "kill", "--signal", "SIGKILL", container_id.removeprefix("containerd://"))

    job = wait_finished(kube, namespace, "killed", timeout=180)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded", job["status"]
    assert job["status"].get("restartCount") == 1
    (second,) = pods_of(kube, namespace, "killed")
    assert second.metadata is not None and second.metadata.uid != first.metadata.uid
    assert (folder / "runs").read_text().split() == ["started", "started", "done"]
    seen = events(kube, namespace)
    assert ("ExitedWithCode", f"Pod: {namespace}.killed-worker-0 exited with code 137") in seen
    assert any(reason == "TFJobRestarting" for reason, _ in seen), seen


@pytest.mark.timeout(1200)
def test_a_pod_the_kubelet_evicts_is_replaced_and_the_job_succeeds(
    node: Node, kube: Client, installed_operator: dict[str, Any], namespace: str
) -> None:
    """The kubelet's eviction manager evicts the first pod (it writes past its
    ephemeral-storage limit); the replacement runs to the end."""
    folder = shared_folder(node, f"evicted-{namespace}")
    script = (
        "if [ -e /shared/evicted-once ]; then echo second; sleep 3; echo finished; exit 0; fi; "
        "touch /shared/evicted-once; echo filling; "
        "head -c 20000000 /dev/zero > /scratch/fill; sleep 300"
    )
    document = with_folder(
        shell_job("evicted", namespace, workers=1, restart_policy="ExitCode", script=script),
        folder,
    )
    spec = document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["volumes"].append({"name": "scratch", "emptyDir": {}})
    spec["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})
    spec["containers"][0]["resources"] = {"limits": {"ephemeral-storage": "5Mi"}}
    submit(kube, document)
    first = running_pod(kube, namespace, "evicted")
    assert first.metadata is not None

    # The eviction manager looks every 10 s; the pod must be Failed/Evicted by then.
    deadline = time.monotonic() + 90
    evicted: Pod | None = None
    while evicted is None:
        for pod in kube.list(Pod, namespace=namespace):
            same = pod.metadata is not None and pod.metadata.uid == first.metadata.uid
            if same and pod.status is not None and pod.status.reason == "Evicted":
                evicted = pod
        if evicted is None and not any(
            p.metadata and p.metadata.uid == first.metadata.uid
            for p in kube.list(Pod, namespace=namespace)
        ):
            break  # already replaced; the events say why
        assert time.monotonic() < deadline, "the kubelet did not evict the pod"
        time.sleep(0.2)

    job = wait_finished(kube, namespace, "evicted", timeout=180)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded", job["status"]
    (second,) = pods_of(kube, namespace, "evicted")
    assert second.metadata is not None and second.metadata.uid != first.metadata.uid
    seen = events(kube, namespace)
    assert any(r == "Evicted" and "ephemeral" in m for r, m in seen), seen
    # One restart, though the kubelet counts the evicted pod's lost container as one.
    status = get_job(kube, namespace, "evicted")["status"]
    assert status.get("restartCount") == 1, status
