"""Fixtures for tests against a real Kubernetes control plane (etcd + kube-apiserver).

One control plane serves the whole session (starting one costs seconds); each test
gets a fresh namespace for isolation. Contracts, for test writers:

- ``control_plane`` (session): a started ``ControlPlane``. If the binaries are missing
  and cannot be built, the test is skipped with a one-line reason, or failed when the
  environment has ``CI=true`` (a CI run must never pass by skipping). Set
  ``TFJOB_ENVTEST_BUILD=0`` to never build (skip instead) on a machine without a cache.
- ``kubeconfig`` (session): path of an admin (system:masters) kubeconfig; hand it to
  the operator or any client (``--kubeconfig``).
- ``operator_kubeconfig`` (session): kubeconfig of the operator's ServiceAccount
  identity, ``system:serviceaccount:tfjob-system:tfjob-operator``; RBAC applies to it
  once ``rbac_installed`` (or manifests/base/rbac.yaml) has been applied.
- ``kube`` (session): a lightkube sync ``Client`` with admin rights.
- ``namespace`` (function): name of a fresh namespace, deleted (best effort) after the
  test. Until the ``cluster`` fixture has started the controller-manager, a deleted
  namespace stays Terminating, which is harmless: names are unique.
- ``kubelet`` (session): a ``FakeKubelet`` (testkit/kubelet.py).
- ``crd_installed`` (session): manifests/base/crd.yaml applied and Established; its
  value is the lightkube generic resource class for TFJob (``.Status`` included).
- ``pytorchjob_crd_installed`` (session): manifests/base/pytorchjob-crd.yaml applied
  and Established.
- ``kind_crds_installed`` (session): the JAXJob, XGBoostJob and PaddleJob CRDs
  (manifests/base/<kind>-crd.yaml) applied and Established.
- ``rbac_installed`` (session): the namespace, ServiceAccount and RBAC from
  manifests/base applied.
- ``cluster`` (session): a started ``Cluster`` (testkit/cluster.py): the control
  plane plus kube-scheduler, kube-controller-manager and kwok (and the Volcano,
  kube-batch and scheduler-plugins PodGroup CRDs of testkit/crds/). Started on first use
  and kept for the rest of the session; with no nodes it binds nothing, so tests that
  play the kubelet themselves are unaffected. Skips/fails like ``control_plane``.
- ``nodes`` (function): a ``Nodes`` for the test: ``nodes.add(count, cpu=, memory=,
  pods=)`` creates kwok nodes of that size (Ready when it returns); they and their
  pods are removed after the test. Pods end through the annotations in
  testkit/cluster.py (``EXIT_CODE_ANNOTATION`` ...).
- ``kwok`` (function): one default-size kwok node (via ``nodes``) and a ``KwokPods``:
  ``kwok.wait_running(namespace, count, labels)`` and ``kwok.end(namespace, pod,
  exit_code, reason)``.
- ``operators`` (function): starts ``tfjob operator`` subprocesses on demand, as the
  operator's ServiceAccount (so RBAC from manifests/base is exercised), each watching
  only the test's namespace (namespaces of earlier tests linger, Terminating, without
  a controller-manager). Every operator still running at the end gets SIGTERM and
  must exit 0 within 20 s: every test also checks the graceful shutdown.
- ``operator`` (function): one operator for the test's namespace, ready (``/readyz``).
- ``jobs`` (function): the test's namespace through an admin client - create TFJobs,
  read them, list pods/services/events, wait for conditions (testkit/operators.py).

A test that uses ``control_plane`` (directly or through any fixture above) is marked
``controlplane`` (tests/conftest.py); the pure tests here are not, so
``-m "not controlplane"`` runs them.
When one fails, the apiserver's and etcd's log tails are added to its report.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace

from testkit.cluster import Cluster, KwokPods, Nodes
from testkit.controlplane import (
    MANIFESTS_BASE,
    Assets,
    ControlPlane,
    ControlPlaneError,
    ControlPlaneUnavailable,
    apply_documents,
    find_assets,
    load_manifest,
    tfjob_resource,
)
from testkit.kubelet import FakeKubelet
from testkit.operators import Jobs, Operators, RunningOperator

GANG_CRDS = Path(__file__).resolve().parents[2] / "testkit" / "crds"
_ASSETS = pytest.StashKey[Assets | ControlPlaneUnavailable]()
_PLANE = pytest.StashKey[ControlPlane]()
_CLUSTER = pytest.StashKey[Cluster]()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Find (or build) the binaries before any test runs, outside per-test timeouts.

    A cold build takes minutes; inside a fixture it would count against the first
    test's timeout. Only done when some selected test needs the control plane.
    """
    config = session.config
    if config.option.collectonly or _ASSETS in config.stash:
        return
    if not any("control_plane" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    try:
        config.stash[_ASSETS] = find_assets(build=False)
        return
    except ControlPlaneUnavailable as exc:
        config.stash[_ASSETS] = exc
    if os.environ.get("TFJOB_ENVTEST_BUILD", "1") == "0":
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            "test cluster: building kube-apiserver, etcd, kube-scheduler, "
            "kube-controller-manager, kubectl, kwok, training-operator and kueue from Go "
            "modules (first run only, about 15 min; see docs/control-plane.md)"
        )
    try:
        config.stash[_ASSETS] = find_assets(build=True)
    except ControlPlaneUnavailable as exc:
        config.stash[_ASSETS] = exc


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep the call's report on the item (the ``operators`` fixture reads it) and
    attach the control plane's log tails to the report of a failed test."""
    report: Any = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    plane = item.config.stash.get(_PLANE, None)
    if report.failed and plane is not None and "control_plane" in getattr(item, "fixturenames", ()):
        report.sections.append(("control plane logs", plane.log_tails(60)))
        cluster = item.config.stash.get(_CLUSTER, None)
        if cluster is not None:
            report.sections.append(("cluster logs", cluster.log_tails(30)))
    return report  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """One real etcd + kube-apiserver for the whole session."""
    assets = pytestconfig.stash.get(_ASSETS, None)
    if assets is None:  # collected in an unusual way; resolve now
        try:
            assets = find_assets(build=os.environ.get("TFJOB_ENVTEST_BUILD", "1") != "0")
        except ControlPlaneUnavailable as exc:
            assets = exc
    if isinstance(assets, ControlPlaneUnavailable):
        reason = f"no Kubernetes control plane: {assets}"
        if _in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    plane = ControlPlane(assets)
    try:
        plane.start()
    except ControlPlaneUnavailable as exc:
        if _in_ci():
            pytest.fail(f"no Kubernetes control plane: {exc}", pytrace=False)
        pytest.skip(f"no Kubernetes control plane: {exc}")
    except ControlPlaneError as exc:
        # The binaries exist, so this is a real failure everywhere, not a skip.
        pytest.fail(f"the control plane did not start:\n{exc}", pytrace=False)
    pytestconfig.stash[_PLANE] = plane
    try:
        yield plane
    finally:
        del pytestconfig.stash[_PLANE]
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    """Admin kubeconfig (system:masters) for the session's control plane."""
    return control_plane.kubeconfig_path


@pytest.fixture(scope="session")
def operator_kubeconfig(control_plane: ControlPlane) -> Path:
    """Kubeconfig authenticating as the operator's ServiceAccount (RBAC applies)."""
    return control_plane.operator_kubeconfig_path


@pytest.fixture(scope="session")
def kube(kubeconfig: Path) -> Iterator[Client]:
    """A lightkube sync client with admin rights."""
    client = Client(KubeConfig.from_file(kubeconfig), field_manager="tfjob-tests")
    yield client
    client.close()


@pytest.fixture(scope="session")
def kubelet(kube: Client) -> FakeKubelet:
    """Stands in for the kubelet: moves pods through their phases via pods/status."""
    return FakeKubelet(kube)


def _namespace_name(node_name: str) -> str:
    """A readable, unique, valid namespace name derived from the test's name."""
    stem = re.sub(r"[^a-z0-9]+", "-", node_name.lower()).strip("-")[:40].strip("-")
    return f"{stem or 't'}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(kube: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (best effort)."""
    name = _namespace_name(request.node.name)
    kube.create(Namespace(metadata=ObjectMeta(name=name, labels={"tfjob-test": "true"})))
    yield name
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, name)


def _wait_established(kube: Client, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = kube.get(CustomResourceDefinition, name)
        conditions = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise TimeoutError(f"CRD {name} not Established within {timeout:.0f} s")


@pytest.fixture(scope="session")
def crd_installed(kube: Client) -> Any:
    """The TFJob CRD from manifests/base/crd.yaml, applied and Established.

    Returns the lightkube generic resource class for TFJob.
    """
    apply_documents(kube, load_manifest(MANIFESTS_BASE / "crd.yaml"))
    _wait_established(kube, "tfjobs.kubeflow.org")
    return tfjob_resource()


@pytest.fixture(scope="session")
def pytorchjob_crd_installed(kube: Client) -> None:
    """The PyTorchJob CRD from manifests/base/pytorchjob-crd.yaml, applied and
    Established."""
    apply_documents(kube, load_manifest(MANIFESTS_BASE / "pytorchjob-crd.yaml"))
    _wait_established(kube, "pytorchjobs.kubeflow.org")


@pytest.fixture(scope="session")
def kind_crds_installed(kube: Client) -> None:
    """The JAXJob, XGBoostJob, PaddleJob and MPIJob CRDs from manifests/base, applied
    and Established."""
    for kind in ("jaxjob", "xgboostjob", "paddlejob", "mpijob"):
        apply_documents(kube, load_manifest(MANIFESTS_BASE / f"{kind}-crd.yaml"))
    for kind in ("jaxjob", "xgboostjob", "paddlejob", "mpijob"):
        _wait_established(kube, f"{kind}s.kubeflow.org")


@pytest.fixture(scope="session")
def rbac_installed(kube: Client, crd_installed: Any) -> None:
    """The operator's namespace, ServiceAccount, ClusterRole and bindings applied."""
    for name in ("namespace.yaml", "service-account.yaml", "rbac.yaml"):
        apply_documents(kube, load_manifest(MANIFESTS_BASE / name))


@pytest.fixture(scope="session")
def cluster(
    control_plane: ControlPlane, kube: Client, pytestconfig: pytest.Config
) -> Iterator[Cluster]:
    """kube-scheduler, kube-controller-manager and kwok on the session's control plane.

    The gang schedulers' PodGroup CRDs (testkit/crds/) are installed first: the
    garbage collector watches the resources it finds when it starts, and only looks
    for new ones every 30 s.
    """
    for crd in sorted(GANG_CRDS.glob("*.yaml")):
        docs = load_manifest(crd)
        apply_documents(kube, docs)
        _wait_established(kube, docs[0]["metadata"]["name"])
    try:
        started = Cluster(control_plane, control_plane.assets).start()
    except ControlPlaneUnavailable as exc:
        if _in_ci():
            pytest.fail(f"no test cluster: {exc}", pytrace=False)
        pytest.skip(f"no test cluster: {exc}")
    except ControlPlaneError as exc:
        pytest.fail(f"the test cluster did not start:\n{exc}", pytrace=False)
    pytestconfig.stash[_CLUSTER] = started
    try:
        yield started
    finally:
        del pytestconfig.stash[_CLUSTER]
        started.stop()


@pytest.fixture
def nodes(cluster: Cluster, kube: Client, namespace: str) -> Iterator[Nodes]:
    """kwok nodes for one test, removed (with their pods) afterwards."""
    pool = Nodes(kube, namespace)
    yield pool
    pool.remove_all()


@pytest.fixture
def kwok(nodes: Nodes, kube: Client) -> KwokPods:
    """Room for small jobs on one kwok node, and a handle to wait for and end pods."""
    nodes.add(1)
    return KwokPods(kube)


@pytest.fixture
def operators(
    operator_kubeconfig: Path,
    rbac_installed: None,
    crd_installed: Any,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Operators]:
    group = Operators(operator_kubeconfig, namespace, tmp_path)
    yield group
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for running in group.started:
            print(f"--- operator log ({' '.join(running.args[-6:])}) ---\n{running.log_tail(80)}")
    codes = [(r.stop(), r) for r in group.started if r.process.returncode is None]
    for code, running in codes:
        assert code == 0, f"operator exited {code} on SIGTERM:\n{running.log_tail()}"


@pytest.fixture
def operator(operators: Operators) -> RunningOperator:
    return operators.start()


@pytest.fixture
def jobs(kube: Client, namespace: str, crd_installed: Any) -> Jobs:
    return Jobs(kube, namespace)
