"""The operator as a cluster runs it: its image (scripts/image.sh) imported into a real
node, installed with the README's command, running in a pod under PodSecurity
`restricted` with its ServiceAccount's in-cluster credentials (through the
`kubernetes` Service's IP and kube-proxy), holding its Lease, and scraped through its
Service. Then upgraded in place while a job runs, with a Ready operator pod all
along, and scaled to two: the standby is Ready and takes over when the leader dies."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Pod, Service

from testkit.node import Node
from tests.node.conftest import REPO, kubectl, readme_install_command
from tests.node.jobs import pods_of, shell_job, submit, wait_finished

OPERATOR_LABELS = {"app.kubernetes.io/name": "tfjob", "app.kubernetes.io/component": "operator"}


def operator_pods(kube: Client) -> list[Pod]:
    return [
        p
        for p in kube.list(Pod, namespace="tfjob-system", labels=OPERATOR_LABELS)
        if p.metadata is not None and p.metadata.deletionTimestamp is None
    ]


def ready_operator_pods(kube: Client) -> int:
    """How many operator pods the kubelet's probe finds Ready (a Service sends to them)."""
    return sum(
        any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        for p in operator_pods(kube)
        if p.status is not None
    )


def restarts(kube: Client, name: str) -> int:
    """The restart count of operator pod `name`'s container."""
    pod = kube.get(Pod, name, namespace="tfjob-system")
    return sum(c.restartCount for c in (pod.status.containerStatuses if pod.status else None) or [])


def lease_holder(kube: Client) -> str:
    """The pod holding the operator's Lease (its identity is `<pod>_<random>`)."""
    lease = kube.get(Lease, "tfjob-operator", namespace="tfjob-system")
    assert lease.spec is not None
    return (lease.spec.holderIdentity or "").rsplit("_", 1)[0]


class ReadyCount:
    """The fewest Ready operator pods seen while it runs (polled on a thread)."""

    def __init__(self, kube: Client) -> None:
        self.fewest: int | None = None
        self._kube = kube
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ReadyCount:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            with_ready = ready_operator_pods(self._kube)
            self.fewest = with_ready if self.fewest is None else min(self.fewest, with_ready)


def running_workers(kube: Client, namespace: str, job: str, count: int) -> list[Pod]:
    """The job's `count` pods, once every one of them is Running."""
    return until(  # type: ignore[no-any-return]
        lambda: (
            (p := pods_of(kube, namespace, job))
            and len(p) == count
            and all(x.status.phase == "Running" for x in p)
            and p
        ),
        120,
        f"{count} Running workers of {job}",
    )


def scrape(kube: Client) -> str:
    """GET /metrics through the operator's Service (its ClusterIP, kube-proxy's rules)."""
    service = kube.get(Service, "tfjob-operator", namespace="tfjob-system")
    assert service.spec is not None and service.spec.clusterIP
    url = f"http://{service.spec.clusterIP}:8080/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        return str(response.read().decode())


def until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ApiError, AssertionError) as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout:.0f} s (last: {last!r})")


@pytest.mark.timeout(2400)
def test_operator_from_its_image_is_ready_under_restricted_holds_the_lease_and_serves_metrics(
    node: Node, kube: Client, installed_operator: dict[str, Any]
) -> None:
    namespace = kube.get(Namespace, "tfjob-system")
    assert namespace.metadata is not None and namespace.metadata.labels is not None
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"

    (pod,) = operator_pods(kube)
    assert pod.spec is not None and pod.status is not None and pod.metadata is not None
    assert pod.spec.containers[0].image == installed_operator["image"] == "localhost/tfjob:0.1.0"
    (status,) = pod.status.containerStatuses or []
    assert status.ready and status.state is not None and status.state.running is not None
    assert status.containerID and status.containerID.startswith("containerd://")  # a real one
    ready = [c for c in pod.status.conditions or [] if c.type == "Ready"]
    assert ready and ready[0].status == "True"

    # `restricted` is enforced there, not only labelled: a pod breaking it is refused.
    with pytest.raises(ApiError) as refused:
        kube.create(
            Pod.from_dict(  # type: ignore[attr-defined]
                {
                    "metadata": {"name": "privileged", "namespace": "tfjob-system"},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "localhost/tfjob/pause:1",
                                "securityContext": {"privileged": True},
                            }
                        ]
                    },
                }
            ),
            dry_run=True,
        )
    assert refused.value.status.code == 403
    assert "violates PodSecurity" in str(refused.value.status.message)

    # It reconciles through in-cluster credentials: it holds the Lease, by its pod name.
    lease = until(
        lambda: kube.get(Lease, "tfjob-operator", namespace="tfjob-system"), 60, "the Lease"
    )
    assert lease.spec.holderIdentity.startswith(f"{pod.metadata.name}_")

    text = until(
        lambda: (
            (t := scrape(kube))
            and 'leader_election_master_status{name="tfjob-operator"} 1.0' in t
            and t
        ),
        60,
        "/metrics through the Service saying it leads",
    )
    assert "controller_runtime_reconcile_total" in text
    assert "process_resident_memory_bytes" in text


@pytest.mark.timeout(1200)
def test_upgrade_in_place_while_a_job_runs_keeps_the_job_and_its_pods(
    node: Node,
    kube: Client,
    installed_operator: dict[str, Any],
    namespace: str,
    tmp_path: Path,
) -> None:
    """A second tag of the image applied with kubectl while a job runs: the Deployment
    rolls to the new pod, the new leader takes the job over, nothing is recreated, and
    the job finishes."""
    (old,) = operator_pods(kube)
    assert old.metadata is not None
    tag = "localhost/tfjob:0.1.0-upgrade"
    subprocess.run(["buildah", "tag", installed_operator["image"], tag], check=True)
    node.import_buildah_image(tag)

    submit(
        kube, shell_job("upgrade", namespace, workers=2, script="echo started; sleep 25; echo done")
    )
    running = running_workers(kube, namespace, "upgrade", 2)
    uids = {p.metadata.name: p.metadata.uid for p in running}
    services = {s.metadata.name: s.metadata.uid for s in kube.list(Service, namespace=namespace)}

    # The user's own kustomization over the release, moved to the new tag, applied as
    # the README installs.
    overlay = tmp_path / "upgrade"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(REPO / "manifests" / "base", overlay)],
                "images": [{"name": "localhost/tfjob", "newTag": tag.split(":")[1]}],
            }
        )
    )
    deployment = kube.get(Deployment, "tfjob-operator", namespace="tfjob-system")
    assert deployment.spec is not None and deployment.spec.strategy is not None
    assert deployment.spec.strategy.type == "RollingUpdate"  # a standby is Ready
    with ReadyCount(kube) as ready:
        kubectl(node, *readme_install_command()[:-1], str(overlay))
        kubectl(
            node, "-n", "tfjob-system", "rollout", "status", "deployment/tfjob-operator",
            "--timeout=180s", timeout=200,
        )  # fmt: skip
    assert ready.fewest is not None and ready.fewest >= 1  # no downtime: never 0 Ready
    (new,) = until(lambda: len(p := operator_pods(kube)) == 1 and p, 60, "one operator pod")
    assert new.metadata is not None and new.spec is not None
    assert new.metadata.uid != old.metadata.uid
    assert new.spec.containers[0].image == tag
    until(lambda: lease_holder(kube) == new.metadata.name, 90, "the new pod leading")  # type: ignore[union-attr]

    job = wait_finished(kube, namespace, "upgrade", timeout=180)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    after = {p.metadata.name: p.metadata.uid for p in pods_of(kube, namespace, "upgrade")}
    assert after == uids  # the same pods ran to the end (cleanPodPolicy None)
    assert {
        s.metadata.name: s.metadata.uid for s in kube.list(Service, namespace=namespace)
    } == services
    deployment = kube.get(Deployment, "tfjob-operator", namespace="tfjob-system")
    assert deployment.status is not None and deployment.status.availableReplicas == 1


@pytest.mark.timeout(900)
def test_a_second_replica_is_a_ready_standby_and_takes_over_a_hung_leader(
    node: Node, kube: Client, installed_operator: dict[str, Any], namespace: str
) -> None:
    """Scaled to 2, both pods are Ready, one leads. Its container frozen (the cgroup
    freezer: a hung or cut-off process, which neither renews nor releases the Lease),
    the standby takes the Lease once the lease duration (15 s) has passed and adopts
    the running job without recreating a pod. Thawed, the old leader finds the Lease
    gone and exits; the standby keeps leading and serves new jobs. (A SIGKILLed
    leader is restarted by the kubelet in the same pod within a second or two and may
    win the Lease back itself: right, but no proof of the standby.)"""
    kubectl(node, "-n", "tfjob-system", "scale", "deployment/tfjob-operator", "--replicas=2")
    try:
        until(lambda: ready_operator_pods(kube) == 2, 120, "2 Ready operator pods")
        leader = until(lambda: lease_holder(kube), 60, "a leader")
        (standby,) = [p for p in operator_pods(kube) if p.metadata.name != leader]  # type: ignore[union-attr]
        assert standby.metadata is not None and standby.metadata.name

        submit(
            kube,
            shell_job("kept", namespace, workers=2, script="echo started; sleep 40; echo done"),
        )
        running = running_workers(kube, namespace, "kept", 2)
        uids = {p.metadata.name: p.metadata.uid for p in running}

        (hung,) = [p for p in operator_pods(kube) if p.metadata.name == leader]  # type: ignore[union-attr]
        assert hung.status is not None
        (status,) = hung.status.containerStatuses or []
        assert status.containerID
        container = status.containerID.split("://")[1]
        node.ctr("tasks", "pause", container)
        try:
            hung_at = time.monotonic()
            until(lambda: lease_holder(kube) == standby.metadata.name, 60, "the standby leading")  # type: ignore[union-attr]
            took = time.monotonic() - hung_at
        finally:
            node.ctr("tasks", "resume", container, check=False)
        # The lease duration by the standby's clock, plus up to 2 looks at the Lease
        # (2 s retry + 20 % jitter each) and the API round trips.
        assert took <= 15 + 2 * 2.4 + 5, f"took the Lease {took:.1f} s after the freeze"
        until(lambda: restarts(kube, leader) > status.restartCount, 60, "the old leader exiting")
        assert lease_holder(kube) == standby.metadata.name

        submit(kube, shell_job("after", namespace, workers=1, script="echo hello"))
        assert (
            wait_finished(kube, namespace, "after", timeout=120)["status"]["conditions"][-1]["type"]
            == "Succeeded"
        )
        job = wait_finished(kube, namespace, "kept", timeout=120)
        assert job["status"]["conditions"][-1]["type"] == "Succeeded"
        after = {p.metadata.name: p.metadata.uid for p in pods_of(kube, namespace, "kept")}
        assert after == uids  # adopted: the same pods ran to the end, none added
    finally:
        kubectl(node, "-n", "tfjob-system", "scale", "deployment/tfjob-operator", "--replicas=1")
        until(lambda: len(operator_pods(kube)) == 1, 120, "one operator pod again")
