"""The install paths as a user takes them: `kubectl apply --server-side -k` of each
overlay with the real kubectl, then the operator started with the rendered
Deployment's own command line, as the ServiceAccount the overlay binds (so its RBAC is
what is tested), runs a TFJob to Succeeded. Also: a Deployment written for Kubeflow's
operator starts tfjob unchanged.

`--force-conflicts`: other tests in the session applied the same objects with another
field manager; on a fresh cluster the plain command is enough.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client

from testkit import fast_yaml
from testkit.controlplane import ControlPlane
from testkit.helpers import wait_for
from testkit.install import (
    OVERLAYS,
    REPO_ROOT,
    expand,
    find,
    job_runs_to_success,
    kubectl,
    operator_container,
    render,
    service_account_kubeconfig,
    start_operator,
)
from testkit.kubelet import FakeKubelet
from testkit.manager_process import install_crds
from testkit.operators import Jobs, RunningOperator

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = fast_yaml.load(path.read_text())
    return loaded


@pytest.fixture
def started() -> Iterator[list[RunningOperator]]:
    """Operators the test started; each must stop cleanly on SIGTERM."""
    running: list[RunningOperator] = []
    yield running
    for operator in running:
        code = operator.stop()
        assert code == 0, f"operator exited {code}:\n{operator.log_tail()}"


@pytest.fixture
def jobs(kube: Client, namespace: str, crd_installed: Any) -> Jobs:
    return Jobs(kube, namespace)


def apply(folder: Path, kubeconfig: Path) -> None:
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(folder), kubeconfig=kubeconfig)
    kubectl(
        "wait", "--for=condition=Established", "crd/tfjobs.kubeflow.org", "--timeout=60s",
        kubeconfig=kubeconfig,
    )  # fmt: skip


def test_base_pins_the_image_to_this_release(control_plane: ControlPlane) -> None:
    docs = render(REPO_ROOT / "manifests" / "base")
    assert operator_container(docs)["image"] == f"localhost/tfjob:{VERSION}"


def test_cluster_overlay_runs_jobs_in_any_namespace(
    kubeconfig: Path,
    operator_kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    kubelet: FakeKubelet,
    tmp_path: Path,
    started: list[RunningOperator],
) -> None:
    # README's one command, and the cluster overlay, which is the same install.
    apply(REPO_ROOT / "manifests" / "base", kubeconfig)
    folder = OVERLAYS / "cluster"
    apply(folder, kubeconfig)
    docs = render(folder)
    assert docs == render(REPO_ROOT / "manifests" / "base")
    assert find(docs, "ClusterRole", "tfjob-operator")["rules"]
    container = operator_container(docs)
    assert container["image"] == f"localhost/tfjob:{VERSION}"
    env = {"POD_NAMESPACE": "tfjob-system"}
    args = expand(container["args"], env)
    assert not any(a.startswith("--namespace") for a in args)  # every namespace
    # The Deployment's --leader-elect, on a Lease of this test's own (tfjob-system is
    # shared by the session; the Role there allows any Lease name).
    lease = f"install-{namespace}"
    args.append(f"--leader-election-id={lease}")
    operator = start_operator(args, operator_kubeconfig, tmp_path / "operator.log", env)
    started.append(operator)
    operator.wait_ready()
    job_runs_to_success(jobs, kubelet, "cluster-wide")
    assert operator.metric("leader_election_master_status", name=lease) == 1


def test_namespaced_overlay_runs_jobs_with_a_role_only(
    control_plane: ControlPlane,
    kube: Client,
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    kubelet: FakeKubelet,
    tmp_path: Path,
    started: list[RunningOperator],
) -> None:
    # The documented way to pick the namespace: a kustomization naming it.
    folder = tmp_path / "install"
    folder.mkdir()
    overlay = os.path.relpath(OVERLAYS / "namespaced", folder)
    (folder / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": namespace, "resources": [overlay]})
    )
    apply(folder, kubeconfig)
    docs = render(folder)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ClusterRole", "tfjob-operator") not in kinds
    assert ("ClusterRoleBinding", "tfjob-operator") not in kinds
    assert ("Role", "tfjob-operator") in kinds and ("RoleBinding", "tfjob-operator") in kinds
    # Cluster-wide, only reading the runtimes a TrainJob names by default.
    cluster_wide = [d for d in docs if d["kind"] == "ClusterRole"]
    assert [rule for role in cluster_wide for rule in role["rules"]] == [
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["clustertrainingruntimes"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} <= {
        None,
        namespace,
    }
    account = service_account_kubeconfig(
        kubeconfig, namespace, "tfjob-operator", kubeconfig, tmp_path / "operator.kubeconfig"
    )
    can = kubectl("auth", "can-i", "list", "pods", "-n", namespace, kubeconfig=account)
    assert can.strip() == "yes"
    cannot = kubectl(
        "auth", "can-i", "list", "pods", "-n", "default", kubeconfig=account, check=False
    )
    assert cannot.strip() == "no"

    container = operator_container(docs)
    env = {"POD_NAMESPACE": namespace}
    args = expand(container["args"], env)
    assert f"--namespace={namespace}" in args
    # With every CRD TrainJobs need (the overlay brought Trainer's; JobSet's here), the
    # operator serves them too, so the Role and that one read must be enough for it.
    jobset_crds = control_plane.assets.tool("jobset-controller-manager").resolve().parent
    install_crds(
        kube, [load_yaml(p) for p in sorted((jobset_crds / "config/crd/bases").glob("*.yaml"))]
    )
    operator = start_operator(args, account, tmp_path / "operator.log", env)
    started.append(operator)
    operator.wait_ready()

    # (Ready already as a standby: the kinds served are logged once it leads.)
    def serving() -> str | None:
        log = operator.log_path.read_text(errors="replace").splitlines()
        return next((line for line in log if "serving" in line and "kinds" in line), None)

    assert "TrainJob" in wait_for(serving, 30, message="the operator to log what it serves")
    job_runs_to_success(jobs, kubelet, "scoped")


def test_a_deployment_written_for_kubeflow_starts_tfjob(
    operator_kubeconfig: Path,
    rbac_installed: None,
    namespace: str,
    jobs: Jobs,
    kubelet: FakeKubelet,
    tmp_path: Path,
    started: list[RunningOperator],
) -> None:
    [deployment] = fast_yaml.load_all(
        (REPO_ROOT / "tests/kubernetes/kubeflow-deployment.yaml").read_text()
    )
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/manager"]  # the image runs `tfjob operator` for it
    # KUBEFLOW_NAMESPACE (honoured by both operators) keeps it to the test's namespace.
    env = {"KUBEFLOW_NAMESPACE": namespace}
    operator = start_operator(
        ["operator", *container["args"]], operator_kubeconfig, tmp_path / "operator.log", env
    )
    started.append(operator)
    operator.wait_ready()
    job_runs_to_success(jobs, kubelet, "from-kubeflow")
    assert operator.metric("workqueue_work_duration_seconds_count", name="tfjob-controller") >= 1
    assert operator.metric("process_resident_memory_bytes") > 0
