"""A whole test cluster without containers: the control plane plus the parts that act.

``ControlPlane`` (testkit/controlplane.py) is an API server and etcd: nothing
schedules, runs or garbage-collects a pod. ``Cluster`` attaches the rest to it, as
child processes, each the real program:

- kube-scheduler (same k8s.io/kubernetes build as the API server), with native gang
  scheduling on (``GANG_FEATURE_GATES``): it binds pods to nodes;
- kube-controller-manager, running only the controllers the tests rely on
  (``CONTROLLERS``): garbage collection through ownerReferences, EndpointSlices for
  Services, namespace deletion, removal of pods of deleted nodes, the PodGroup
  finalizer, and batch Jobs' pods (the Jobs JobSet makes for a TrainJob);
- kwok (sigs.k8s.io/kwok), which plays the kubelet of every Node it manages: nodes
  become Ready, bound pods Running, and end Succeeded or Failed with the exit code a
  pod annotation asks for (the stages in testkit/kwok/stages.yaml, constants
  below). It also serves container logs, so ``kubectl logs`` works: every pod's every
  container shows the file ``container_log`` (CRI log format; ``write_container_log``).

Nodes are created by tests (``add_node``) with the size they need: the scheduler fits
pods by their requests against ``status.allocatable``. See docs/control-plane.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import Node, Pod

from testkit.controlplane import (
    GANG_FEATURE_GATES,
    Assets,
    ControlPlane,
    ControlPlaneError,
    _die_with_parent,
    _tail,
    terminate,
)
from testkit.helpers import free_port

STAGES_FILE = Path(__file__).resolve().parent / "kwok" / "stages.yaml"

#: Pod annotations the kwok stages read (set them in a TFJob's replica template).
#: ``"0"`` ends the pod Succeeded, any other number Failed with that exit code.
EXIT_CODE_ANNOTATION = "kwok.tfjob.test/exit-code"
#: How long the pod stays Running before it ends (a Go duration: "500ms", "3s").
RUN_FOR_ANNOTATION = "kwok.tfjob.test/run-for"
#: The terminated container's reason on failure (default "Error"; e.g. "OOMKilled").
REASON_ANNOTATION = "kwok.tfjob.test/reason"

#: What the controller-manager runs. Not the defaults: no node-lifecycle controller
#: (kwok sends no heartbeats, so it would taint and evict every node after 40 s), no
#: token signer, no cloud or certificate parts.
CONTROLLERS = (
    "garbage-collector-controller",
    "endpointslice-controller",
    "namespace-controller",
    "pod-garbage-collector-controller",
    "podgroup-protection-controller",
    # batch/v1 Jobs make pods: JobSet (testkit/jobset.py) runs a TrainJob as Jobs.
    "job-controller",
)

_STOP_ORDER = ("kwok", "kube-controller-manager", "kube-scheduler")


class Cluster:
    """kube-scheduler, kube-controller-manager and kwok on a running ``ControlPlane``.

    ``start()`` returns once each answers its health check; ``stop()`` (or the
    ``with``) stops them, leaving the control plane running. Logs go to the control
    plane's log folder (``log_tails()`` for failure reports).
    """

    def __init__(self, plane: ControlPlane, assets: Assets, *, start_timeout: float = 60.0):
        self.plane = plane
        self.assets = assets
        self.start_timeout = start_timeout
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._folder: Path | None = None
        self.kwok_port = 0

    # -- public API --------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        if self._folder is None:
            raise RuntimeError("the cluster is not started")
        return self._folder

    @property
    def container_log(self) -> Path:
        """The file kwok serves as every container's log (CRI log format)."""
        return self.folder / "container.log"

    @property
    def pids(self) -> dict[str, int]:
        return {n: p.pid for n, p in self._procs.items() if p.poll() is None}

    @property
    def running(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for p in self._procs.values())

    def start(self) -> Cluster:
        """Start the scheduler, the controller-manager and kwok; wait until healthy."""
        if self.running:
            return self
        if self.plane.workdir is None:
            raise RuntimeError("start the control plane first")
        self._folder = self.plane.workdir / "cluster"
        self._folder.mkdir(exist_ok=True)
        self.write_container_log([])
        deadline = time.monotonic() + self.start_timeout
        try:
            self._start_scheduler(deadline)
            self._start_controller_manager(deadline)
            self._start_kwok(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM each part (kwok first), SIGKILL what is still there after 10 s."""
        for name in _STOP_ORDER:
            terminate(self._procs.pop(name, None))

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @contextlib.contextmanager
    def frozen(self, name: str) -> Iterator[None]:
        """`name` (say "kwok") stopped (SIGSTOP) inside the block, continued after it:
        what happens meanwhile reaches it late, all at once, as under heavy load."""
        process = self._procs[name]
        process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            process.send_signal(signal.SIGCONT)

    def log_tails(self, lines: int = 30) -> str:
        if self.plane.workdir is None:
            return "(cluster not running; no logs)"
        return "\n".join(
            f"----- {name} (last {lines} lines) -----\n"
            + _tail(self.plane.log_dir / f"{name}.log", lines)
            for name in reversed(_STOP_ORDER)
        )

    def write_container_log(self, lines: Iterable[str]) -> None:
        """Replace what ``kubectl logs`` shows for every container (stdout lines)."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        text = "".join(f"{stamp} stdout F {line}\n" for line in lines)
        self.container_log.write_text(text)

    # -- internals ---------------------------------------------------------------------

    def _start_scheduler(self, deadline: float) -> None:
        self._start_component("kube-scheduler", "scheduler-certs", deadline, [])

    def _start_controller_manager(self, deadline: float) -> None:
        extra = [
            f"--controllers={','.join(CONTROLLERS)}",
            # Pods of a deleted node go at once, not after the default 12500 pods.
            "--terminated-pod-gc-threshold=100",
        ]
        self._start_component(
            "kube-controller-manager", "controller-manager-certs", deadline, extra
        )

    def _start_component(self, name: str, certs: str, deadline: float, extra: list[str]) -> None:
        """Start kube-scheduler or kube-controller-manager as admin, with the gang
        feature gates, and wait until its /healthz answers."""
        port = free_port()
        kubeconfig = str(self.plane.kubeconfig_path)
        self._spawn(
            name,
            [
                str(self.assets.tool(name)),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.folder / certs}",
                f"--feature-gates={GANG_FEATURE_GATES}",
                *extra,
            ],
        )
        self._wait(name, deadline, lambda: _https_ok(port, "/healthz"))

    def _start_kwok(self, deadline: float) -> None:
        port = free_port()
        self.kwok_port = port
        config = self.folder / "kwok.yaml"
        logs = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "every-container"},
            "spec": {"selector": {}, "logs": [{"logsFile": str(self.container_log)}]},
        }
        config.write_text(STAGES_FILE.read_text() + "\n---\n" + yaml.safe_dump(logs))
        self._spawn(
            "kwok",
            [
                str(self.assets.tool("kwok")),
                f"--kubeconfig={self.plane.kubeconfig_path}",
                f"--config={config}",
                "--manage-all-nodes=true",
                "--node-ip=127.0.0.1",
                f"--node-port={port}",
                f"--server-address=127.0.0.1:{port}",
            ],
        )
        self._wait("kwok", deadline, lambda: _any_answer(port))

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.plane.log_dir / f"{name}.log").open("ab")
        parent = os.getpid()
        try:
            self._procs[name] = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
            )
        finally:
            log.close()

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool]) -> None:
        proc = self._procs[name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} during start-up\n"
                    + self.log_tails()
                )
            with contextlib.suppress(OSError, ssl.SSLError, ValueError):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{name} not healthy within {self.start_timeout:.0f} s\n")


def _https_ok(port: int, path: str) -> bool:
    """The component's own serving certificate is self-signed: no verification."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    with opener.open(f"https://127.0.0.1:{port}{path}", timeout=2) as resp:
        return bool(resp.status == 200)


def _any_answer(port: int) -> bool:
    """kwok is serving once its port answers anything (it has no health path there)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    for scheme in ("https", "http"):
        try:
            with opener.open(f"{scheme}://127.0.0.1:{port}/healthz", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except (OSError, ssl.SSLError):
            continue
    return False


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ephemeral_storage: str | None = None,
) -> dict[str, object]:
    """A Node kwok takes over; the scheduler fits pods against its allocatable (and
    keeps off its `taints` the pods that do not tolerate them). Without
    `ephemeral_storage` a pod asking for any (an MPIJob launcher's kubectl-delivery)
    does not fit."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if ephemeral_storage is not None:
        allocatable["ephemeral-storage"] = ephemeral_storage
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                **(labels or {}),
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": taints} if taints else {},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def unique_node_name(prefix: str = "kwok") -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


class Nodes:
    """kwok Nodes one test adds; ``remove_all()`` takes them away with their pods.

    Nodes are the capacity the scheduler fits pods into, so tests that count bound
    pods own theirs. Before the first node appears, pods left unbound by earlier tests
    (their namespaces being deleted) are removed, so they cannot take the room.
    """

    def __init__(
        self, kube: Client, namespace: str, *, taint: dict[str, str] | None = None
    ) -> None:
        """With ``taint``, every node added carries it too: only pods that tolerate it
        land there (a lane of tests/kubernetes/kueue running beside others, whose
        pods must not take its room, nor it theirs)."""
        self.kube = kube
        self.namespace = namespace
        self.taint = taint
        self.names: list[str] = []

    def add(
        self,
        count: int = 1,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        ephemeral_storage: str | None = None,
        timeout: float = 30.0,
    ) -> list[str]:
        """Create ``count`` nodes of this size; return their names once kwok has them Ready."""
        if not self.names and self.taint is None:  # strays cannot land on tainted nodes
            self._clear_strays()
        if self.taint is not None:
            taints = [*(taints or []), self.taint]
        added = [unique_node_name() for _ in range(count)]
        for name in added:
            manifest = node_manifest(
                name,
                cpu=cpu,
                memory=memory,
                pods=pods,
                labels=labels,
                taints=taints,
                ephemeral_storage=ephemeral_storage,
            )
            self.kube.create(codecs.from_dict(manifest))
            self.names.append(name)
        deadline = time.monotonic() + timeout
        for name in added:
            while not _node_ready(self.kube.get(Node, name)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kwok did not make node {name} Ready in {timeout:.0f} s")
                time.sleep(0.1)
        return added

    def remove_all(self) -> None:
        """Delete the nodes, then their pods (no kubelet is left to finish them)."""
        for name in self.names:
            with contextlib.suppress(ApiError):
                self.kube.delete(Node, name)
        for name in self.names:
            for pod in self.kube.list(Pod, namespace="*", fields={"spec.nodeName": name}):
                with contextlib.suppress(ApiError):
                    self.kube.delete(
                        Pod,
                        pod.metadata.name,  # type: ignore[union-attr, arg-type]
                        namespace=pod.metadata.namespace,  # type: ignore[union-attr]
                        grace_period=0,
                    )
        self.names.clear()

    def _clear_strays(self) -> None:
        """Unbound pods outside this test's namespace are left over from earlier tests
        (their namespaces being deleted): they go now, before they can take the room."""
        strays = [
            p
            for p in self.kube.list(Pod, namespace="*", fields={"spec.nodeName": ""})
            if p.metadata is not None and p.metadata.namespace != self.namespace
        ]
        for pod in strays:
            with contextlib.suppress(ApiError):
                self.kube.delete(
                    Pod,
                    pod.metadata.name,  # type: ignore[union-attr, arg-type]
                    namespace=pod.metadata.namespace,  # type: ignore[union-attr]
                    grace_period=0,
                )


def _node_ready(node: Node) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class KwokPods:
    """A test's handle on pods kwok runs: wait until they are Running, end them.

    Ending a pod is what its program would do: the exit-code annotation the kwok stages
    read (kwok then writes the terminated containers and the phase).
    """

    def __init__(self, kube: Client) -> None:
        self.kube = kube

    def wait_running(
        self,
        namespace: str,
        count: int,
        labels: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> list[str]:
        """Names of `count` pods matching `labels`, once each is bound and Running."""
        deadline = time.monotonic() + timeout
        names: list[str] = []
        while True:
            found = list(self.kube.list(Pod, namespace=namespace, labels=dict(labels or {})))
            names = sorted(p.metadata.name for p in found if p.metadata and p.metadata.name)
            running = [
                p
                for p in found
                if p.spec and p.spec.nodeName and p.status and p.status.phase == "Running"
            ]
            if len(found) >= count and len(running) == len(found):
                return names
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"expected {count} Running pods in {namespace} with {labels or {}}, "
                    f"saw {names} ({len(running)} Running)"
                )
            time.sleep(0.1)

    def end(self, namespace: str, name: str, exit_code: int = 0, reason: str = "") -> None:
        """The pod's containers exit with `exit_code` (Succeeded if 0, else Failed)."""
        annotations = {EXIT_CODE_ANNOTATION: str(exit_code)}
        if reason:
            annotations[REASON_ANNOTATION] = reason
        self.kube.patch(Pod, name, {"metadata": {"annotations": annotations}}, namespace=namespace)
