"""The test control plane itself: a real kube-apiserver that the other suites can trust.

If these fail, every other Kubernetes test is meaningless, so they check what the
others silently rely on: the version clients see, authentication and RBAC being on,
namespaces, and that FakeKubelet's pod transitions go through the real API server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from lightkube import ApiError, Client
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod

from testkit.controlplane import REPO_ROOT, ControlPlane, has_default_route
from testkit.kubelet import FakeKubelet


def _built_version() -> str:
    """The Kubernetes version tools/envtest/build.sh builds (from the wrapper go.mod)."""
    gomod = (REPO_ROOT / "tools" / "envtest" / "apiserver" / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes (v\S+)", gomod, re.MULTILINE)
    assert match, "tools/envtest/apiserver/go.mod does not require k8s.io/kubernetes"
    return match.group(1)


def _pod(name: str, restart_policy: str = "Never") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name),
        spec=PodSpec(
            restartPolicy=restart_policy,
            containers=[
                Container(name="tensorflow", image="tensorflow/tensorflow:2.16.1"),
                Container(name="sidecar", image="busybox:1.36"),
            ],
        ),
    )


def _container_status(pod: Pod, name: str = "tensorflow") -> dict[str, object]:
    statuses = pod.to_dict()["status"].get("containerStatuses", [])
    return next(s for s in statuses if s["name"] == name)


def test_version_is_a_real_release(control_plane: ControlPlane) -> None:
    """/version must carry the release the binary was built from, not v0.0.0.

    Clients (kubectl, the kubernetes Python client's version checks) choke on v0.0.0,
    which is what a build without the version ldflags reports.
    """
    status, info = control_plane.request("GET", "/version")
    assert status == 200
    if os.environ.get("KUBEBUILDER_ASSETS") or os.environ.get("TEST_ASSET_KUBE_APISERVER"):
        assert re.fullmatch(r"v1\.\d+\.\d+.*", info["gitVersion"]), info
    else:
        assert info["gitVersion"] == _built_version()
        assert info["major"] == "1"
        assert info["minor"] == _built_version().split(".")[1]


def test_kubeconfig_works_with_the_kubernetes_client(kubeconfig: Path, namespace: str) -> None:
    """The official client (what Kubeflow's SDK uses) reads our kubeconfig unchanged."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    names = [ns.metadata.name for ns in api.list_namespace().items]
    assert namespace in names and "default" in names


def test_a_stopped_plane_leaves_nothing_behind(control_plane: ControlPlane) -> None:
    """stop() (here via the context manager) ends both processes and removes its files."""
    with ControlPlane(control_plane.assets) as plane:
        assert plane.request("GET", "/readyz")[0] == 200
        pids = plane.pids
        workdir = plane.workdir
        assert set(pids) == {"etcd", "kube-apiserver"}
    for pid in pids.values():
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert workdir is not None and not workdir.exists()
    assert not plane.running


def test_starts_without_a_default_route(control_plane: ControlPlane) -> None:
    """Sandboxed CI runners often have no default route; the apiserver then refuses to
    start unless given an advertise address. Reproduced in a fresh network namespace
    (loopback only), where that code path really runs."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("needs unshare(1) and ip(8)")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode:
        pytest.skip("no permission to create a network namespace")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from testkit.controlplane import Assets, ControlPlane, has_default_route
        assert not has_default_route()
        assets = Assets({str(control_plane.assets.kube_apiserver)!r},
                        {str(control_plane.assets.etcd)!r})
        with ControlPlane(assets) as plane:
            print(plane.request("GET", "/version")[1]["gitVersion"])
        """
    )
    # sh's $0 and $1 are the interpreter and the script: no quoting games.
    in_netns = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" -c "$1"']
    done = subprocess.run(
        [*in_netns, sys.executable, script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().startswith("v1.")


def test_requests_without_a_valid_token_are_refused(control_plane: ControlPlane) -> None:
    """Authentication is really on, so RBAC tests elsewhere mean something."""
    status, _ = control_plane.request("GET", "/api/v1/namespaces", token="not-a-token")
    assert status == 401
    status, _ = control_plane.request("GET", "/api/v1/namespaces", token="")
    assert status == 403  # anonymous is authenticated as system:anonymous, then denied


def test_namespace_fixture_gives_a_usable_namespace(kube: Client, namespace: str) -> None:
    assert kube.get(Namespace, namespace).status.phase == "Active"
    kube.create(ConfigMap(metadata=ObjectMeta(name="probe"), data={"k": "v"}), namespace=namespace)
    assert kube.get(ConfigMap, "probe", namespace=namespace).data == {"k": "v"}


def test_fake_kubelet_runs_then_fails_a_pod_with_exit_code_137(
    kube: Client, kubelet: FakeKubelet, namespace: str
) -> None:
    kube.create(_pod("worker-0"), namespace=namespace)
    # No kubelet and no scheduler: a pod stays Pending until someone plays the kubelet.
    assert kube.get(Pod, "worker-0", namespace=namespace).status.phase == "Pending"

    kubelet.run(namespace, "worker-0")
    running = kube.get(Pod, "worker-0", namespace=namespace)
    assert running.status.phase == "Running"
    assert "running" in _container_status(running)["state"]

    kubelet.fail(namespace, "worker-0", exit_code=137, reason="OOMKilled")
    failed = kube.get(Pod, "worker-0", namespace=namespace)
    assert failed.status.phase == "Failed"
    terminated = _container_status(failed)["state"]["terminated"]  # type: ignore[index]
    assert terminated["exitCode"] == 137
    assert terminated["reason"] == "OOMKilled"
    # The other container ended too, cleanly, as the operator would see it.
    assert _container_status(failed, "sidecar")["state"]["terminated"]["exitCode"] == 0  # type: ignore[index]


def test_fake_kubelet_success_and_in_place_restart(
    kube: Client, kubelet: FakeKubelet, namespace: str
) -> None:
    kube.create(_pod("chief-0", restart_policy="OnFailure"), namespace=namespace)
    kubelet.run(namespace, "chief-0")
    kubelet.restart_in_place(namespace, "chief-0", exit_code=1)
    kubelet.restart_in_place(namespace, "chief-0", exit_code=1)
    pod = kube.get(Pod, "chief-0", namespace=namespace)
    status = _container_status(pod)
    assert pod.status.phase == "Running"
    assert status["restartCount"] == 2
    assert status["lastState"]["terminated"]["exitCode"] == 1  # type: ignore[index]

    kubelet.succeed(namespace, "chief-0")
    done = kube.get(Pod, "chief-0", namespace=namespace)
    assert done.status.phase == "Succeeded"
    assert _container_status(done)["state"]["terminated"]["exitCode"] == 0  # type: ignore[index]
    assert _container_status(done)["restartCount"] == 2


def test_fake_kubelet_evicts_a_pod(kube: Client, kubelet: FakeKubelet, namespace: str) -> None:
    kube.create(_pod("ps-0"), namespace=namespace)
    kubelet.run(namespace, "ps-0")
    kubelet.evict(namespace, "ps-0")
    pod = kube.get(Pod, "ps-0", namespace=namespace)
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert any(c.type == "DisruptionTarget" for c in pod.status.conditions or [])


def test_api_server_refuses_impossible_pod_transitions(
    kube: Client, kubelet: FakeKubelet, namespace: str
) -> None:
    """FakeKubelet writes through the real pods/status validation.

    A pod that failed under restartPolicy Never cannot run again; the API server says
    so, which proves the helper is not bypassing anything.
    """
    kube.create(_pod("worker-1"), namespace=namespace)
    kubelet.run(namespace, "worker-1")
    kubelet.fail(namespace, "worker-1", exit_code=1)
    with pytest.raises(ApiError) as refused:
        kubelet.run(namespace, "worker-1")
    assert refused.value.status.code == 422


def test_default_route_detection(tmp_path: Path) -> None:
    """With no default route the apiserver needs an explicit advertise address."""
    header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
    with_default = tmp_path / "route-default"
    with_default.write_text(header + "eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    without = tmp_path / "route-none"
    without.write_text(header + "eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    assert has_default_route(str(with_default))
    assert not has_default_route(str(without))
    assert not has_default_route(str(tmp_path / "missing"))


def test_children_die_with_the_test_process(tmp_path: Path) -> None:
    """etcd/kube-apiserver must not outlive a killed pytest (PR_SET_PDEATHSIG).

    A helper process spawns a child exactly the way ControlPlane does, then dies
    abruptly (no cleanup code runs); the kernel must take the child down with it.
    """
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from testkit.controlplane import _die_with_parent
        parent = os.getpid()
        child = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: _die_with_parent(parent))
        print(child.pid, flush=True)
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.05)
    psutil.Process(child).kill()
    pytest.fail(f"child {child} survived its parent")
