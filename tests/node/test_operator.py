"""The operator as a cluster runs it: its image (scripts/image.sh) imported into a real
node, installed with the README's command, running in a pod under PodSecurity
`restricted` with its ServiceAccount's in-cluster credentials (through the
`kubernetes` Service's IP and kube-proxy), holding its Lease, and scraped through its
Service. Then upgraded in place while a job runs."""

from __future__ import annotations

import os
import subprocess
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
    running = until(
        lambda: (
            (p := pods_of(kube, namespace, "upgrade"))
            and len(p) == 2
            and all(x.status.phase == "Running" for x in p)
            and p
        ),
        120,
        "2 Running workers",
    )
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
    kubectl(node, *readme_install_command()[:-1], str(overlay))
    kubectl(
        node, "-n", "tfjob-system", "rollout", "status", "deployment/tfjob-operator",
        "--timeout=180s", timeout=200,
    )  # fmt: skip
    (new,) = until(lambda: len(p := operator_pods(kube)) == 1 and p, 60, "one operator pod")
    assert new.metadata is not None and new.spec is not None
    assert new.metadata.uid != old.metadata.uid
    assert new.spec.containers[0].image == tag
    until(
        lambda: kube.get(
            Lease, "tfjob-operator", namespace="tfjob-system"
        ).spec.holderIdentity.startswith(f"{new.metadata.name}_"),
        90,
        "the new pod leading",
    )

    job = wait_finished(kube, namespace, "upgrade", timeout=180)
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    after = {p.metadata.name: p.metadata.uid for p in pods_of(kube, namespace, "upgrade")}
    assert after == uids  # the same pods ran to the end (cleanPodPolicy None)
    assert {
        s.metadata.name: s.metadata.uid for s in kube.list(Service, namespace=namespace)
    } == services
    deployment = kube.get(Deployment, "tfjob-operator", namespace="tfjob-system")
    assert deployment.status is not None and deployment.status.availableReplicas == 1
