"""charts/tfjob on a real node, as a team that already has the CRDs would install it:
`helm install` of the namespaced operator (`namespaced=true`, `crds.install=false`)
into a namespace of its own brings a Ready operator pod from the image, which runs a
job there to Succeeded; `helm upgrade --set replicas=2` brings two Ready pods, one
holding the Lease; `helm uninstall` takes the operator away and keeps the namespace
(helm's record of the release lives there) and the jobs in it.

The operator the README's command installed (tfjob-system, cluster-wide) is scaled to
0 meanwhile: two operators must not both reconcile the chart's namespace."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from testkit.controlplane import find_assets, tfjob_resource
from testkit.node import Node
from tests.node.conftest import REPO, kubectl
from tests.node.jobs import shell_job, submit, wait_finished
from tests.node.test_operator import OPERATOR_LABELS, operator_pods, until

RELEASE = "tfjob-team"
NAMESPACE = "tfjob-helm"


def helm(node: Node, *args: str, timeout: float = 300, check: bool = True) -> str:
    """The built helm against the node (the test process is in its network namespace)."""
    binary = find_assets(build=False).tool("helm")
    done = subprocess.run(
        [str(binary), "--kubeconfig", str(node.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def ready_pods(kube: Client) -> list[Pod]:
    """The chart's operator pods the kubelet's probe finds Ready."""
    return [
        p
        for p in kube.list(Pod, namespace=NAMESPACE, labels=OPERATOR_LABELS)
        if p.metadata is not None
        and p.metadata.deletionTimestamp is None
        and p.status is not None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


@pytest.fixture
def readme_operator_stopped(
    node: Node, kube: Client, installed_operator: dict[str, Any]
) -> Iterator[None]:
    kubectl(node, "-n", "tfjob-system", "scale", "deployment/tfjob-operator", "--replicas=0")
    until(lambda: not operator_pods(kube), 120, "no operator pod in tfjob-system")
    yield
    kubectl(node, "-n", "tfjob-system", "scale", "deployment/tfjob-operator", "--replicas=1")
    kubectl(
        node, "-n", "tfjob-system", "rollout", "status", "deployment/tfjob-operator",
        "--timeout=180s", timeout=200,
    )  # fmt: skip


@pytest.mark.timeout(1200)
def test_helm_install_and_upgrade_bring_a_ready_operator_that_runs_jobs(
    node: Node, kube: Client, installed_operator: dict[str, Any], readme_operator_stopped: None
) -> None:
    values = ["--set", "namespaced=true", "--set", "crds.install=false"]
    chart = [RELEASE, str(REPO / "charts" / "tfjob"), "--namespace", NAMESPACE]
    try:
        helm(node, "install", *chart, "--create-namespace", *values, "--wait", "--timeout=180s")
        (pod,) = until(lambda: ready_pods(kube), 60, "a Ready operator pod")
        assert pod.spec is not None
        assert pod.spec.containers[0].image == installed_operator["image"]
        assert pod.spec.serviceAccountName == "tfjob-operator"

        submit(kube, shell_job("charted", NAMESPACE, workers=2, script="echo hello"))
        job = wait_finished(kube, NAMESPACE, "charted", timeout=180)
        assert job["status"]["conditions"][-1]["type"] == "Succeeded"

        helm(node, "upgrade", *chart, *values, "--set", "replicas=2", "--wait", "--timeout=180s")
        until(lambda: len(ready_pods(kube)) == 2, 120, "2 Ready operator pods")
        deployment = kube.get(Deployment, "tfjob-operator", namespace=NAMESPACE)
        assert deployment.status is not None and deployment.status.readyReplicas == 2
        names = {p.metadata.name for p in ready_pods(kube) if p.metadata is not None}
        lease = until(
            lambda: (
                (spec := kube.get(Lease, "tfjob-operator", namespace=NAMESPACE).spec)
                and (spec.holderIdentity or "").rsplit("_", 1)[0] in names
                and spec
            ),
            90,
            "one of the two pods holding the Lease",
        )
        assert lease.holderIdentity

        submit(kube, shell_job("upgraded", NAMESPACE, workers=1, script="echo again"))
        job = wait_finished(kube, NAMESPACE, "upgraded", timeout=180)
        assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    except BaseException:
        helm(node, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", check=False)
        raise
    helm(node, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout=180s")
    try:
        assert helm(node, "list", "--all-namespaces", "-q").split() == []
        assert not list(kube.list(Deployment, namespace=NAMESPACE))
        jobs = kube.list(tfjob_resource(), namespace=NAMESPACE)
        assert sorted(j.metadata.name for j in jobs) == ["charted", "upgraded"]
    finally:
        kubectl(node, "delete", "namespace", NAMESPACE, "--timeout=120s", timeout=150)
