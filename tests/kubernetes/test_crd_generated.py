"""The CRDs are generated from the API server the tests run, and install as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from lightkube import Client
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from testkit.controlplane import REPO_ROOT, ControlPlane


def _kubectl(plane: ControlPlane) -> list[str]:
    return [str(plane.assets.tool("kubectl")), "--kubeconfig", str(plane.kubeconfig_path)]


def test_the_committed_crd_is_what_the_generator_makes(control_plane: ControlPlane) -> None:
    """tools/crd/generate.py reads this API server's PodTemplateSpec schema; the
    committed CRDs (TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob) and the package's schemas must be exactly its
    output."""
    kubectl, _, kubeconfig = _kubectl(control_plane)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tools" / "crd" / "generate.py"),
            "--kubectl",
            kubectl,
            "--kubeconfig",
            kubeconfig,
            "--check",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr + "\nrun tools/crd/generate.py to regenerate"


def test_the_readme_install_command_applies(
    control_plane: ControlPlane, kube: Client, crd_installed: Any
) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    [command] = re.findall(r"^(kubectl apply [^\n]+)$", readme, re.MULTILINE)
    assert "--server-side" in command
    args = command.split()[1:]
    done = subprocess.run(
        [*_kubectl(control_plane), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "customresourcedefinition.apiextensions.k8s.io/tfjobs.kubeflow.org" in done.stdout
    for plural in ("pytorchjobs", "jaxjobs", "xgboostjobs", "paddlejobs"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.kubeflow.org" in done.stdout
    crd = kube.get(CustomResourceDefinition, "tfjobs.kubeflow.org").to_dict()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    replica = schema["properties"]["spec"]["properties"]["tfReplicaSpecs"]["additionalProperties"]
    assert "containers" in replica["properties"]["template"]["properties"]["spec"]["properties"]
