"""The operator's container image, built from the Containerfile with buildah on a
Debian base made locally (scripts/image.sh; no registry is needed), then run as a
container runtime would: `tfjob --version`, its labels, user and size, and the
operator itself from the image against the test cluster (host network) with the command line
of a Deployment written for Kubeflow's operator, until /readyz answers and a job runs.

Without buildah and mmdebstrap (and outside CI, where scripts/image.sh installs
them) these tests skip with the script's one-line reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client

from testkit import fast_yaml
from testkit.helpers import free_port
from testkit.install import REPO_ROOT, job_runs_to_success
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, RunningOperator

SCRIPT = REPO_ROOT / "scripts" / "image.sh"
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
#: Half of what the image weighed on a whole Debian base (226 MB, buildah's count).
SIZE_LIMIT_MB = 113
BUILD_TIMEOUT = 1200  # a cold base (mmdebstrap) and a cold pip cache; ~2 min here


@pytest.fixture(scope="session")
def image() -> str:
    """Build (or reuse the cached layers of) localhost/tfjob:<version>."""
    done = subprocess.run(
        ["bash", str(SCRIPT), "build"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if done.returncode == 2:
        reason = f"no image tools: {done.stderr.strip().splitlines()[-1]}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    if done.returncode != 0:
        pytest.fail(f"scripts/image.sh build failed:\n{done.stderr[-4000:]}", pytrace=False)
    return done.stdout.strip().splitlines()[-1]


@contextmanager
def container(image: str) -> Iterator[str]:
    """A buildah working container of `image`, removed afterwards."""
    name = subprocess.run(
        ["buildah", "from", image], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def run_in(name: str, *command: str, options: tuple[str, ...] = ()) -> list[str]:
    return ["buildah", "run", "--isolation", "chroot", *options, name, "--", *command]


@pytest.mark.timeout(BUILD_TIMEOUT + 60)
def test_image_runs_tfjob_as_a_non_root_user_and_carries_its_version(image: str) -> None:
    assert image == f"localhost/tfjob:{VERSION}"
    inspected = subprocess.run(
        ["buildah", "inspect", "--type", "image", image], capture_output=True, text=True, check=True
    )
    config = json.loads(inspected.stdout)["OCIv1"]["config"]
    assert config["Labels"]["org.opencontainers.image.version"] == VERSION
    assert config["Entrypoint"] == ["tfjob"]
    assert config["User"] == "65532:65532"
    with container(image) as name:
        version = subprocess.run(
            run_in(name, "tfjob", "--version"), capture_output=True, text=True, check=True
        )
        assert version.stdout.strip() == f"tfjob, version {VERSION}"
        user = subprocess.run(run_in(name, "id", "-u"), capture_output=True, text=True, check=True)
        assert user.stdout.strip() == "65532"


def test_image_is_at_most_half_the_size_it_had_on_a_whole_debian_base(image: str) -> None:
    listed = subprocess.run(
        ["buildah", "images", "--json", image], capture_output=True, text=True, check=True
    )
    size = json.loads(listed.stdout)[0]["size"]  # buildah's count, e.g. "92.3 MB"
    found = re.fullmatch(r"([\d.]+) (kB|MB|GB)", size)
    assert found, size
    megabytes = float(found[1]) * {"kB": 1e-3, "MB": 1.0, "GB": 1e3}[found[2]]
    assert megabytes <= SIZE_LIMIT_MB, size
    with container(image) as name:
        # What a job script or a look inside needs is still there, and the system's CA
        # certificates for HTTPS (beside any CA a kubeconfig names).
        shell = run_in(name, "sh", "-c", "echo ok; sleep 0.1; head -c 2 /etc/passwd; ls /manager")
        done = subprocess.run(shell, capture_output=True, text=True, check=True)
        assert done.stdout.split() == ["ok", "ro/manager"], done.stdout
        stats = "import ssl; print(ssl.create_default_context().cert_store_stats()['x509_ca'])"
        cas = subprocess.run(
            run_in(name, "python3", "-c", stats), capture_output=True, text=True, check=True
        )
        assert int(cas.stdout) > 0


@pytest.mark.timeout(BUILD_TIMEOUT + 120)
def test_the_operator_from_the_image_serves_the_cluster(
    image: str,
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    kube: Client,
    namespace: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    # The kubeconfig, readable by the image's non-root user, mounted read-only.
    mounted = tmp_path / "kube"
    mounted.mkdir(mode=0o755)
    mounted.chmod(0o755)
    shutil.copy(operator_kubeconfig, mounted / "config")
    (mounted / "config").chmod(0o644)
    [deployment] = fast_yaml.load_all(
        (REPO_ROOT / "tests" / "kubernetes" / "kubeflow-deployment.yaml").read_text()
    )
    [spec] = deployment["spec"]["template"]["spec"]["containers"]
    health, metrics = free_port(), free_port()
    log_path = tmp_path / "operator.log"
    with container(image) as name:
        command = run_in(
            name,
            *spec["command"],  # /manager, as Kubeflow's Deployment says
            *spec["args"],
            "--kubeconfig=/kube/config",
            f"--namespace={namespace}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            options=("--network", "host", "-v", f"{mounted}:/kube:ro"),
        )
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        operator = RunningOperator(process, log_path, health, metrics, command)
        try:
            operator.wait_ready(timeout=120)
            job_runs_to_success(Jobs(kube, namespace), kubelet, "from-image")
        finally:
            operator.kill()  # buildah run ends the container's process with it
    lines = [line for line in log_path.read_text().splitlines() if line.startswith("{")]
    events = [json.loads(line)["event"] for line in lines]  # JSON: not on a terminal
    assert "caches synced" in events
