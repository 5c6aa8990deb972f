"""charts/tfjob with the real helm (built from helm.sh/helm/v4): with default values
`helm template` renders what `kubectl kustomize manifests/base` does (and the
namespaced and monitoring values their overlays), the values users set reach the
objects, bad values stop the render naming the field; `helm install` and `helm
upgrade` on a cluster of its own, where the operator started with the installed
Deployment's command line, as its ServiceAccount, runs a job to Succeeded, and
`helm uninstall` keeps the CRDs and the jobs.

The one difference from kustomize: the chart's CRDs and namespace carry
`helm.sh/resource-policy: keep`, so that uninstalling the chart never deletes jobs
(nor the namespace that holds helm's record of the release).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

from testkit.controlplane import ControlPlane, ControlPlaneError, ControlPlaneUnavailable
from testkit.helm import CHART, helm, template, template_error
from testkit.helpers import wait_for
from testkit.install import (
    OVERLAYS,
    REPO_ROOT,
    expand,
    job_runs_to_success,
    kubectl,
    render,
    service_account_kubeconfig,
    start_operator,
)
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, RunningOperator
from testkit.tfjob_cli import tfjob_command

KEEP = "helm.sh/resource-policy"
ALL_KINDS = ["TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob", "MPIJob"]
# Kubeflow Trainer's CRDs, installed whatever the kinds served.
TRAINER_CRDS = {
    "TrainJob": "trainjobs.trainer.kubeflow.org",
    "TrainingRuntime": "trainingruntimes.trainer.kubeflow.org",
    "ClusterTrainingRuntime": "clustertrainingruntimes.trainer.kubeflow.org",
}

Key = tuple[str, str, str]


def by_key(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def without_keep(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """The chart's objects with the keep annotation of the CRDs and the namespace
    checked and taken off."""
    objects = by_key(docs)
    for key, doc in objects.items():
        if key[0] in ("CustomResourceDefinition", "Namespace"):
            annotations = doc["metadata"].pop("annotations")
            assert annotations == {KEEP: "keep"}, key
    return objects


def differences(kustomize: dict[Key, Any], chart: dict[Key, Any]) -> list[str]:
    found = [f"only kustomize renders {k}" for k in sorted(set(kustomize) - set(chart))]
    found += [f"only the chart renders {k}" for k in sorted(set(chart) - set(kustomize))]
    found += [
        f"{k} differs" for k in sorted(set(kustomize) & set(chart)) if kustomize[k] != chart[k]
    ]
    return found


def the(docs: list[dict[str, Any]], kind: str, name: str = "tfjob-operator") -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def container_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = the(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_default_values_render_the_kustomize_base(control_plane: ControlPlane) -> None:
    chart = without_keep(template("tfjob-system"))
    kustomize = by_key(render(REPO_ROOT / "manifests" / "base"))
    assert differences(kustomize, chart) == []
    crds = [k for k in chart if k[0] == "CustomResourceDefinition"]
    assert len(crds) == len(ALL_KINDS) + len(TRAINER_CRDS)


def test_namespaced_values_render_the_namespaced_overlay(control_plane: ControlPlane) -> None:
    chart = without_keep(template("tfjob", {"namespaced": "true"}))
    kustomize = by_key(render(OVERLAYS / "namespaced"))
    assert differences(kustomize, chart) == []
    assert ("Role", "tfjob", "tfjob-operator") in chart


def test_monitoring_values_render_the_monitoring_overlay(control_plane: ControlPlane) -> None:
    values = {
        "monitoring.serviceMonitor.enabled": "true",
        "monitoring.scrapeAnnotations": "true",
        "monitoring.dashboard.enabled": "true",
    }
    chart = without_keep(template("tfjob-system", values))
    kustomize = by_key(render(OVERLAYS / "monitoring"))
    assert differences(kustomize, chart) == []
    dashboard = chart["ConfigMap", "tfjob-system", "tfjob-dashboard"]["data"][
        "tfjob-dashboard.json"
    ]
    assert json.loads(dashboard)["panels"]


def test_the_values_users_set_reach_the_operator(control_plane: ControlPlane) -> None:
    docs = template(
        "ops",
        {
            "image.repository": "registry.example.com/team/tfjob",
            "image.tag": "1.2.3",
            "replicas": "2",
            "resources.limits.memory": "1Gi",
            "kinds": "{PyTorchJob,MPIJob}",
            "leaderElection.id": "ops-lease",
            "gangScheduler": "volcano",
            "kueue.integration": "external",
            "logLevel": "debug",
            "extraArgs": "{--workers=8}",
            "nodeSelector.pool": "system",
        },
    )
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == {"pytorchjobs.kubeflow.org", "mpijobs.kubeflow.org", *TRAINER_CRDS.values()}
    rules = the(docs, "ClusterRole")["rules"]
    assert rules[0]["resources"] == ["pytorchjobs", "mpijobs"]
    assert rules[1]["resources"] == ["pytorchjobs/status", "mpijobs/status"]
    deployment = the(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}
    container = container_of(docs)
    assert container["image"] == "registry.example.com/team/tfjob:1.2.3"
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    assert container["args"] == [
        "operator",
        "--metrics-port=8080",
        "--health-port=8081",
        "--leader-elect",
        "--leader-election-id=ops-lease",
        "--enable-scheme=pytorchjob",
        "--enable-scheme=mpijob",
        "--gang-scheduler-name=volcano",
        "--kueue-integration=external",
        "--log-level=debug",
        "--workers=8",
    ]
    # Every flag the chart writes is one the operator has.
    usage = subprocess.run(
        [*tfjob_command(), "operator", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for arg in container["args"][1:]:
        assert arg.split("=", 1)[0] in usage, arg


def test_off_switches_leave_their_objects_out(control_plane: ControlPlane) -> None:
    docs = template(
        "ops",
        {"crds.install": "false", "namespace.create": "false", "leaderElection.enabled": "false"},
    )
    kinds = {d["kind"] for d in docs}
    assert "CustomResourceDefinition" not in kinds and "Namespace" not in kinds
    assert not [d for d in docs if d["metadata"]["name"] == "tfjob-operator-leader-election"]
    assert "--leader-elect" not in container_of(docs)["args"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kinds": "{TFjob}"}, "at '/kinds/0': value must be one of 'TFJob'"),
        ({"replica": "2"}, "additional properties 'replica' not allowed"),
        ({"replicas": "two"}, "at '/replicas': got string, want integer"),
        ({"kueue.integration": "maybe"}, "at '/kueue/integration': value must be one of"),
        (
            {"replicas": "2", "leaderElection.enabled": "false"},
            "replicas: more than 1 needs leaderElection.enabled=true",
        ),
    ],
    ids=["kind", "unknown-value", "type", "kueue", "replicas-without-lease"],
)
def test_bad_values_stop_the_render_naming_the_field(
    control_plane: ControlPlane, values: dict[str, str], message: str
) -> None:
    assert message in template_error(values)


# -- on a cluster --------------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of its own: the chart owns cluster-scoped objects (the CRDs,
    the ClusterRole) that the session's cluster has from other installs."""
    own = ControlPlane(control_plane.assets)
    try:
        own.start()
    except (ControlPlaneUnavailable, ControlPlaneError) as exc:
        pytest.fail(f"the chart's cluster did not start:\n{exc}", pytrace=False)
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture(scope="module")
def plane_kube(plane: ControlPlane) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(plane.kubeconfig_path), field_manager="tfjob-tests")
    yield client
    client.close()


def installed_container(kubeconfig: Path) -> dict[str, Any]:
    deployment = json.loads(
        kubectl(
            "-n", "tfjob-system", "get", "deployment", "tfjob-operator", "-o", "json",
            kubeconfig=kubeconfig,
        )
    )  # fmt: skip
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def established(kubeconfig: Path) -> set[str]:
    """The kinds whose CRD is Established (`kubectl wait` fails on a CRD that has no
    conditions yet, so this polls)."""
    crds = json.loads(kubectl("get", "crd", "-o", "json", kubeconfig=kubeconfig))["items"]
    return {
        crd["spec"]["names"]["kind"]
        for crd in crds
        if any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd.get("status", {}).get("conditions") or []
        )
    }


def operator_runs_a_job(
    plane: ControlPlane, kube: Client, tmp_path: Path, namespace: str, name: str
) -> None:
    """The installed Deployment's command line, as the chart's ServiceAccount: Ready,
    then a TFJob in `namespace` runs to Succeeded; it stops cleanly on SIGTERM."""
    admin = plane.kubeconfig_path
    account = service_account_kubeconfig(
        admin, "tfjob-system", "tfjob-operator", admin, tmp_path / f"{name}.kubeconfig"
    )
    env = {"POD_NAMESPACE": "tfjob-system"}
    args = expand(installed_container(admin)["args"], env)
    operator: RunningOperator = start_operator(args, account, tmp_path / f"{name}.log", env)
    try:
        operator.wait_ready()
        job_runs_to_success(Jobs(kube, namespace), FakeKubelet(kube), name)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- operator log ---\n{operator.log_tail(60)}") from exc
    finally:
        code = operator.stop()
    assert code == 0, f"operator exited {code}:\n{operator.log_tail()}"


def test_install_upgrade_and_uninstall_on_a_cluster(
    plane: ControlPlane, plane_kube: Client, tmp_path: Path
) -> None:
    admin = plane.kubeconfig_path
    install = [str(CHART), "--namespace", "tfjob-system", "--create-namespace"]
    helm("install", "tfjob", *install, kubeconfig=admin)
    every = {*ALL_KINDS, *TRAINER_CRDS}
    wait_for(lambda: established(admin) == every, 60, 0.5, "every CRD Established")
    labels = json.loads(kubectl("get", "namespace", "tfjob-system", "-o", "json", kubeconfig=admin))
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # One namespace per run: a job's pods are checked against all pods of its namespace.
    for team in ("team-a", "team-b"):
        kubectl("create", "namespace", team, kubeconfig=admin)
    operator_runs_a_job(plane, plane_kube, tmp_path, "team-a", "installed")

    helm(
        "upgrade", "tfjob", *install[:-1],
        "--set", "replicas=2", "--set", "image.tag=0.1.0-next", "--set", "logLevel=debug",
        kubeconfig=admin,
    )  # fmt: skip
    status = json.loads(
        helm("status", "tfjob", "-n", "tfjob-system", "-o", "json", kubeconfig=admin).stdout
    )
    assert status["version"] == 2 and status["info"]["status"] == "deployed"
    container = installed_container(admin)
    assert container["image"] == "localhost/tfjob:0.1.0-next"
    assert "--log-level=debug" in container["args"]
    operator_runs_a_job(plane, plane_kube, tmp_path, "team-b", "upgraded")

    helm("uninstall", "tfjob", "-n", "tfjob-system", "--wait", kubeconfig=admin)
    kept = kubectl("get", "namespace", "tfjob-system", "-o", "name", kubeconfig=admin)
    assert kept.strip() == "namespace/tfjob-system"
    left = kubectl("get", "crd", "-o", "name", kubeconfig=admin).split()
    assert sorted(left) == sorted(
        [
            *(
                f"customresourcedefinition.apiextensions.k8s.io/{k.lower()}s.kubeflow.org"
                for k in ALL_KINDS
            ),
            *(
                f"customresourcedefinition.apiextensions.k8s.io/{name}"
                for name in TRAINER_CRDS.values()
            ),
        ]
    )
    jobs = kubectl(
        "get", "tfjobs", "-A", "-o", "jsonpath={range .items[*]}{.metadata.name} {end}",
        kubeconfig=admin,
    ).split()  # fmt: skip
    assert sorted(jobs) == ["installed", "upgraded"]
    deployments = kubectl(
        "-n", "tfjob-system", "get", "deployments", "-o", "name", kubeconfig=admin
    )
    assert deployments.strip() == ""
