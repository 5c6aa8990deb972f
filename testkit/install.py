"""Helpers for the install tests: the real kubectl, rendered manifests, and an operator
started with exactly the command line a Deployment gives it.

There is no kubelet to run the Deployment's container, so the tests do its part: take
the container's args, expand `$(VAR)` references from its env the way the kubelet
does, and start `tfjob operator` with them (plus a kubeconfig and free ports, since
the endpoints' fixed ports would collide with anything else on this machine).
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from testkit import fast_yaml
from testkit.controlplane import find_assets
from testkit.helpers import free_port
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, RunningOperator, replica, start_tfjob

REPO_ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = REPO_ROOT / "manifests" / "overlays"


@functools.cache
def kubectl_path() -> Path:
    return find_assets(build=False).tool("kubectl")


def kubectl(*args: str, kubeconfig: Path | None = None, check: bool = True) -> str:
    """Run the built kubectl; its stdout (stderr joins the failure message)."""
    command = [str(kubectl_path())]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def render(folder: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize folder`: what `kubectl apply -k folder` sends."""
    return [doc for doc in fast_yaml.load_all(kubectl("kustomize", str(folder))) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(docs, "Deployment", "tfjob-operator")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """The kubelet's `$(VAR)` expansion of container args (unknown names stay as is)."""
    return [
        re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)
        for arg in args
    ]


def start_operator(
    args: list[str], kubeconfig: Path, log_path: Path, env: dict[str, str] | None = None
) -> RunningOperator:
    """`tfjob <args>` as the container would run it, on free local ports (forked from
    a process that imported the operator once: testkit/operators.py `start_tfjob`)."""
    health, metrics = free_port(), free_port()
    full = [
        *args,
        "--kubeconfig",
        str(kubeconfig),
        # Later flags win: the Deployment's fixed ports would collide here.
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        "--bind-address=127.0.0.1",
    ]
    process = start_tfjob(full, log_path, env)
    return RunningOperator(process, log_path, health, metrics, full)


def service_account_kubeconfig(
    admin: Path, namespace: str, name: str, server_kubeconfig: Path, path: Path
) -> Path:
    """A kubeconfig holding a token of the ServiceAccount `namespace/name` (TokenRequest
    through kubectl), so what the operator may do is decided by the applied RBAC."""
    token = kubectl("create", "token", name, "-n", namespace, kubeconfig=admin).strip()
    config = fast_yaml.load(server_kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = name
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def job_runs_to_success(jobs: Jobs, kubelet: FakeKubelet, name: str) -> None:
    """A one-worker TFJob: the operator creates its pod and service, the pod runs and
    succeeds, and the operator marks the job Succeeded."""
    # The operator's own Service is there too when it is installed in this namespace.
    others = set(jobs.services())
    jobs.create(name, {"Worker": replica(1)})
    pod = f"{name}-worker-0"
    jobs.wait_pods({pod}, timeout=30)
    jobs.wait_services(others | {pod}, timeout=30)
    kubelet.run(jobs.namespace, pod)
    jobs.wait_condition(name, "Running", timeout=30)
    kubelet.succeed(jobs.namespace, pod)
    jobs.wait_condition(name, "Succeeded", timeout=30)
