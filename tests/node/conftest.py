"""The node tier: tests on a real node (testkit/node.py), marked ``node``.

One node for the whole package (``node``, started on first use, stopped and removed
after the package's last test); the images the tests need are built with buildah and
imported into it once (``operator_image``, ``examples_image``, ``base_image``); the
operator is installed by the README's command once (``installed_operator``). The test
process itself runs inside the node's network namespace while the node is up, so its clients
reach the API server, Service IPs and cluster DNS as a pod would.

Outside CI, a machine that cannot have the node (no Go, not root, no buildah) skips
these tests with a one-line reason; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, ServiceAccount

from testkit.controlplane import find_assets
from testkit.node import Node, NodeAssets, NodeUnavailable, find_node_assets, run_outside

REPO = Path(__file__).resolve().parents[2]
IMAGE_SCRIPT = REPO / "scripts" / "image.sh"
EXAMPLES = REPO / "examples" / "tensorflow"
#: The tag the cluster examples name (examples/tensorflow/cluster/*.yaml).
EXAMPLES_IMAGE = "localhost/tfjob-examples:0.1.0"
IMAGE_BUILD_TIMEOUT = 1800  # cold: pip downloads tensorflow-cpu (~600 MB with its deps)

_ASSETS = pytest.StashKey[NodeAssets | NodeUnavailable]()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """Skip, or fail under CI, with a one-line reason."""
    if _in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/node is marked ``node``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.node)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Find or build the node's parts before any test runs, outside test timeouts."""
    config = session.config
    if config.option.collectonly or _ASSETS in config.stash:
        return
    if not any("node" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    build = os.environ.get("TFJOB_ENVTEST_BUILD", "1") != "0"
    try:
        config.stash[_ASSETS] = find_node_assets(build=build)
    except NodeUnavailable as exc:
        config.stash[_ASSETS] = exc


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed node test's report gets the node's log tails."""
    report: Any = yield
    node = _RUNNING.get("node")
    if report.failed and node is not None and "node" in getattr(item, "fixturenames", ()):
        report.sections.append(("node logs", node.log_tails(40)))
    return report


_RUNNING: dict[str, Node] = {}


@pytest.fixture(scope="package")
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    """A started node; the test process is inside its network namespace meanwhile."""
    if os.geteuid() != 0:
        unavailable("the real node needs root (network namespaces, cgroups, mounts)")
    found = request.config.stash.get(_ASSETS, None)
    if found is None:
        try:
            found = find_node_assets(build=os.environ.get("TFJOB_ENVTEST_BUILD", "1") != "0")
        except NodeUnavailable as exc:
            found = exc
    if isinstance(found, NodeUnavailable):
        unavailable(str(found))
    assert isinstance(found, NodeAssets)
    started = Node(found).start()
    _RUNNING["node"] = started
    try:
        yield started
    finally:
        _RUNNING.pop("node", None)
        left = started.stop()
    # Torn down without a trace: no namespace, mount, cgroup, process, host folder or
    # rewritten sysctl of the node's is left on the machine.
    assert left == [], f"the node left behind: {left}"


@pytest.fixture(scope="package")
def kube(node: Node) -> Client:
    """An admin client of the node's API server."""
    return Client(config=KubeConfig.from_file(str(node.kubeconfig_path)), field_manager="tests")


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, deleted afterwards."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{os.urandom(2).hex()}"
    kube.create(Namespace(metadata=ObjectMeta(name=name)))
    # The service-account controller makes `default`, which every pod needs.
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.get(ServiceAccount, "default", namespace=name)
            break
        except ApiError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    yield name
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, name)


def kubectl(node: Node, *args: str, timeout: float = 180, check: bool = True) -> str:
    """The built kubectl against the node (the test process is in its namespace)."""
    binary = find_assets(build=False).tool("kubectl")
    done = subprocess.run(
        [str(binary), "--kubeconfig", str(node.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def _build(args: list[str], what: str) -> str:
    # Outside the node's network namespace: pip inside the build needs the registry.
    done = run_outside(
        args, capture_output=True, timeout=IMAGE_BUILD_TIMEOUT, check=False, cwd=REPO
    )
    if done.returncode == 2:
        unavailable(f"no image tools: {done.stderr.strip().splitlines()[-1]}")
    if done.returncode != 0:
        pytest.fail(f"{what} failed:\n{done.stderr[-4000:]}", pytrace=False)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


@pytest.fixture(scope="package")
def operator_image(node: Node) -> str:
    """scripts/image.sh build, imported into the node: the README's image reference."""
    image = _build(["bash", str(IMAGE_SCRIPT), "build"], "scripts/image.sh build")
    node.import_buildah_image(image)
    return image


@pytest.fixture(scope="package")
def base_image(node: Node) -> str:
    """The local Debian base of the operator's image (scripts/image.sh base: Debian
    bookworm minbase with python3), imported into the node: a full C library and
    libstdc++ with a shell, for pods that run programs mounted from the host."""
    base = _build(["bash", str(IMAGE_SCRIPT), "base"], "scripts/image.sh base")
    node.import_buildah_image(base)
    return base


@pytest.fixture(scope="package")
def examples_image(node: Node) -> str:
    """The TensorFlow examples' image (examples/tensorflow/cluster/Containerfile) on the
    operator's local Debian base, built with buildah and imported into the node."""
    base = _build(["bash", str(IMAGE_SCRIPT), "base"], "scripts/image.sh base")
    args = [
        "buildah", "bud", "--isolation", "chroot", "--layers",
        "--build-arg", f"BASE={base}",
        "-f", str(EXAMPLES / "cluster" / "Containerfile"), "-t", EXAMPLES_IMAGE,
    ]  # fmt: skip
    bundle = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    if Path(bundle).is_file():
        args += [
            "-v", f"{Path(bundle).parent}:/run/host-ca:ro",
            "--build-arg", f"PIP_CA_BUNDLE=/run/host-ca/{Path(bundle).name}",
        ]  # fmt: skip
    _build([*args, str(EXAMPLES)], "buildah bud of the examples' image")
    node.import_buildah_image(EXAMPLES_IMAGE)
    return EXAMPLES_IMAGE


def readme_install_command() -> list[str]:
    """The command README.md's "Install on a cluster" gives, as argv."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Install on a cluster", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block is not None, "README.md: no sh block under 'Install on a cluster'"
    command = block.group(1).strip().splitlines()[0].split()
    assert command[0] == "kubectl", command
    return command[1:]


@pytest.fixture(scope="package")
def installed_operator(node: Node, kube: Client, operator_image: str) -> dict[str, Any]:
    """The operator installed with the README's command and Available: its pod."""
    kubectl(node, *readme_install_command())
    kubectl(
        node, "-n", "tfjob-system", "rollout", "status", "deployment/tfjob-operator",
        "--timeout=180s", timeout=200,
    )  # fmt: skip
    kubectl(node, "wait", "--for=condition=Established", "crd/tfjobs.kubeflow.org")
    return {"image": operator_image}
