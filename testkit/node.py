"""A real Kubernetes node for the tests: real containers, real DNS, real Services.

``Node`` starts, in a network namespace of its own (``lo`` and one bridge, nothing
else: no traffic can leave the machine), every part of a one-node cluster as a
child process, each the real program:

- etcd, kube-apiserver, kube-controller-manager (default controllers: service
  accounts, the root CA ConfigMap, EndpointSlices, garbage collection, ...) and
  kube-scheduler, built by tools/envtest/build.sh;
- containerd v2 with Debian's runc (state, sockets and runc root in the node's
  folder; its root, where images are, in the machine's image store: below),
  kubelet and kube-proxy (iptables mode) of the same k8s.io/kubernetes build, and
  CoreDNS (a minimal build: kubernetes, cache, loadbalance) answering on the
  bridge's address, all built by tools/node/build.sh;
- pod networking by Debian's CNI plugins: ``bridge`` on the node's bridge with
  ``host-local`` addresses (kept in the node's folder) and ``loopback``.

No image is ever pulled: the sandbox image is a local static ``pause``
(tools/node/pause) pinned in containerd's config, and tests import theirs
(``import_image``, ``import_buildah_image``). Pods must say ``imagePullPolicy:
Never`` or ``IfNotPresent``. Imported images outlive the node: containerd's root is
``IMAGE_STORE`` (one per containerd build), which ``stop()`` leaves with no container
or sandbox in it, so the next node starts with the images and an image buildah still
has under the same ID is not imported again. A store a node did not stop cleanly is
emptied before use.

The calling thread (the test process's main thread, or the ``up`` command) enters the
namespace, so everything it starts afterwards, and its own API clients, are inside;
``stop()`` leaves it again. ``stop()`` leaves no trace: it kills the containers, stops
every process, unmounts what they mounted, removes the cgroups, the CNI cache files
and /var/log/containers links, restores the global sysctls kubelet rewrote, deletes
the namespace and the folder. See docs/control-plane.md ("A real node").

By hand: ``tools/node/node.sh up | status | down`` (``python -m testkit.node``).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testkit.controlplane import (
    Assets,
    ControlPlaneUnavailable,
    find_assets,
    run_build_script,
    terminate,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "node" / "build.sh"

#: The node's addresses, inside its own network namespace only.
BRIDGE = "tfjob0"
NODE_IP = "10.88.0.1"
POD_SUBNET = "10.88.0.0/16"
SERVICE_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
API_PORT = 6443
NODE_NAME = "tfjob-node"
CLUSTER_DOMAIN = "cluster.local"
SERVER = f"https://{NODE_IP}:{API_PORT}"
#: What `ctr` and the tests use; kubelet's CRI namespace.
CONTAINERD_NAMESPACE = "k8s.io"

#: Global (not per network namespace) sysctls that kubelet and kube-proxy may
#: rewrite; saved before the start and written back by ``stop()``.
GLOBAL_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/netfilter/nf_conntrack_max",
)

#: Host folders kubelet (device-plugins: a fixed path), CNI (its result cache) and
#: `ip netns` use whatever they are told; those the node creates go with it.
HOST_DIRS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/run/netns",
)

#: containerd's root kept between nodes (one node at a time: the machine lock), so
#: the images imported once (the examples' image is 1.73 GB) are there the next time.
IMAGE_STORE = Path(
    os.environ.get("TFJOB_NODE_IMAGE_STORE") or Path.home() / ".cache" / "tfjob" / "node-images"
)
#: In the store while no node uses it and its last node stopped cleanly.
_STORE_CLEAN = "stopped-cleanly"
#: The image label that records the buildah image ID an image was imported from.
_BUILDAH_ID_LABEL = "tfjob.test/buildah-id"

#: The order parts stop in (the reverse of the start), kubelet before containerd.
_PARTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "containerd",
    "kubelet",
    "kube-proxy",
    "coredns",
)
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_MNT_DETACH = 2
_STATE_FILE = "node.json"


class NodeUnavailable(RuntimeError):
    """The parts are missing and cannot be built or installed here (a skip outside CI)."""


class NodeError(RuntimeError):
    """The parts exist but the node did not come up; the message has the logs."""


@dataclass(frozen=True)
class NodeAssets:
    """tools/node/build.sh's folder (symlinks to every part) and the control plane's."""

    folder: Path
    control_plane: Assets

    def part(self, name: str) -> Path:
        path = self.folder / name
        if not path.exists():
            raise NodeUnavailable(f"{name} is not in {self.folder} (run tools/node/build.sh)")
        return path.resolve()

    @property
    def pause_image(self) -> str:
        return self.part("pause.image").read_text().strip()


def find_node_assets(*, build: bool = True, timeout: float = 3600.0) -> NodeAssets:
    """Run tools/node/build.sh (a version check when cached) and the envtest build."""
    try:
        control_plane = find_assets(build=build)
    except ControlPlaneUnavailable as exc:
        raise NodeUnavailable(str(exc)) from exc
    folder = run_build_script(BUILD_SCRIPT, timeout, build=build, unavailable=NodeUnavailable)
    return NodeAssets(folder, control_plane)


# -- namespaces, processes, mounts -------------------------------------------------------


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


#: The network namespace the thread was in before ``entered`` (for ``run_outside``).
_OUTSIDE: list[int] = []


@contextlib.contextmanager
def entered(netns: str) -> Iterator[None]:
    """The calling thread inside network namespace ``netns`` for the ``with`` block."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    _OUTSIDE.append(here)
    try:
        target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(here)
    finally:
        _OUTSIDE.remove(here)
        os.close(here)


def run_outside(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` in the network namespace the node was started from: what
    needs the machine's network (an image build that downloads packages)."""
    if not _OUTSIDE:
        return subprocess.run(args, text=True, **kwargs)
    fd = _OUTSIDE[0]
    return subprocess.run(args, text=True, preexec_fn=lambda: _setns(fd), **kwargs)


def _die_with_parent(parent_pid: int) -> None:
    """preexec_fn: the kernel SIGKILLs the child when the starting thread dies."""
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _run(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def _open_image_store(store: Path) -> Path:
    """The machine's image store (containerd's root is its `root`), held by this node
    until it stops: kept as the last node left it when that node stopped cleanly (images only;
    CRI's per-container folders of it dropped), emptied otherwise (a node that was
    killed may have left containers and sandboxes in containerd's metadata)."""
    root = store / "root"
    marker = store / _STORE_CLEAN
    if marker.exists():
        marker.unlink()
        shutil.rmtree(root / "io.containerd.grpc.v1.cri", ignore_errors=True)
    elif store.exists():
        shutil.rmtree(store)
    root.mkdir(parents=True, exist_ok=True)
    return store


def _mounts_under(folder: Path) -> list[str]:
    """Mount points at or below ``folder``, deepest (latest) first."""
    prefix = str(folder)
    found: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].encode().decode("unicode_escape")
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return list(reversed(found))


def _unmount_all(folder: Path) -> None:
    libc = _libc()
    for _ in range(5):
        points = _mounts_under(folder)
        if not points:
            return
        for point in points:
            libc.umount2(point.encode(), _MNT_DETACH)


def _processes_with(needle: str) -> list[int]:
    """Pids whose command line or cgroup names ``needle`` (this node's folder or cgroup)."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroups = (entry / "cgroup").read_text()
            if needle in cmdline or f":{needle}" in cgroups or f"/{needle}/" in cgroups:
                found.append(int(entry.name))
    return found


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except OSError:
        return ""


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)


# -- DNS, a query by hand (no resolver library reads our server) --------------------------


def dns_lookup(name: str, server: str = NODE_IP, timeout: float = 2.0) -> list[str]:
    """The A records ``server`` gives for ``name`` (empty on NXDOMAIN or no answer)."""
    ident = secrets.randbelow(65536)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    packet = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + b"\0" + b"\0\1\0\1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(packet, (server, 53))
        data, _ = sock.recvfrom(4096)
    _, flags, qdcount, ancount, _, _ = struct.unpack(">HHHHHH", data[:12])
    if flags & 0xF:
        return []
    offset = 12

    def skip_name(at: int) -> int:
        while data[at]:
            if data[at] & 0xC0 == 0xC0:
                return at + 2
            at += data[at] + 1
        return at + 1

    for _ in range(qdcount):
        offset = skip_name(offset) + 4
    answers = []
    for _ in range(ancount):
        offset = skip_name(offset)
        rtype, _, _, length = struct.unpack(">HHIH", data[offset : offset + 10])
        offset += 10
        if rtype == 1 and length == 4:
            answers.append(socket.inet_ntoa(data[offset : offset + 4]))
        offset += length
    return answers


# -- the node ------------------------------------------------------------------------------


class Node:
    """A one-node cluster with real containers; see the module docstring.

    ``detached=True`` (the ``up`` command) starts the processes so they outlive the
    caller; ``Node.attach(folder)`` finds them again (``status``, ``down``).
    """

    def __init__(
        self,
        assets: NodeAssets | None = None,
        *,
        folder: Path | None = None,
        detached: bool = False,
        start_timeout: float = 180.0,
        keep_folder: bool = False,
    ) -> None:
        self._assets = assets
        self.detached = detached
        self.start_timeout = start_timeout
        self.keep_folder = keep_folder
        self._requested_folder = folder
        self.folder: Path | None = None
        self.netns = ""
        self.cgroup = ""
        self.token = ""
        self.pids: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._sysctls: dict[str, str] = {}
        self._created_dirs: list[str] = []
        self._netns_context: contextlib.ExitStack | None = None
        self._machine_lock: int | None = None
        self._store: Path | None = None  # the image store in use (containerd's root)
        self.timings: dict[str, float] = {}

    # -- paths -------------------------------------------------------------------------

    @property
    def assets(self) -> NodeAssets:
        if self._assets is None:
            self._assets = find_node_assets()
        return self._assets

    def _path(self, *parts: str) -> Path:
        if self.folder is None:
            raise RuntimeError("the node is not started")
        return self.folder.joinpath(*parts)

    @property
    def kubeconfig_path(self) -> Path:
        return self._path("kubeconfig")

    @property
    def ca_path(self) -> Path:
        return self._path("pki", "ca.crt")

    @property
    def log_dir(self) -> Path:
        return self._path("logs")

    @property
    def containerd_socket(self) -> Path:
        return self._path("containerd", "containerd.sock")

    @property
    def pod_logs_dir(self) -> Path:
        return self._path("pod-logs")

    # -- start -------------------------------------------------------------------------

    def start(self) -> Node:
        started = time.monotonic()
        assets = self.assets
        self._machine_lock = _take_machine_lock(self.start_timeout + MACHINE_LOCK_PATIENCE)
        reap_orphans()
        if self._requested_folder is not None:
            self.folder = self._requested_folder
            self.folder.mkdir(parents=True, exist_ok=False)
        else:
            # Short: containerd's and the shims' unix sockets live here (108 bytes).
            self.folder = Path(tempfile.mkdtemp(prefix="tfn-", dir="/tmp"))
        ident = self.folder.name.replace("_", "-").lower()
        self.netns = f"tfjob-{ident}"
        self.cgroup = f"tfjob-{ident}"
        self.token = secrets.token_hex(24)
        for sub in ("logs", "pki", "containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"):
            self._path(sub).mkdir(parents=True, exist_ok=True)
        try:
            self._save_host_state()
            self._make_netns()
            self._make_cgroups()
            self._save_state()
            stack = contextlib.ExitStack()
            stack.enter_context(entered(self.netns))
            self._netns_context = stack
            self._certificates()
            deadline = time.monotonic() + self.start_timeout
            self._start_control_plane(assets, deadline)
            self.timings["control plane"] = time.monotonic() - started
            self._start_containerd(assets, deadline)
            self._start_kubelet(assets)
            self._start_kube_proxy(assets)
            self._start_coredns(assets)
            self._wait_ready(deadline)
            self._save_state()
        except BaseException:
            self.stop()
            raise
        self.timings["node"] = time.monotonic() - started
        return self

    def _save_host_state(self) -> None:
        """What stop() restores: the global sysctls and which host folders existed."""
        self._created_dirs = [d for d in HOST_DIRS if not Path(d).exists()]
        for name in GLOBAL_SYSCTLS:
            with contextlib.suppress(OSError):
                self._sysctls[name] = Path("/proc/sys", name).read_text().strip()

    def _make_netns(self) -> None:
        _run("ip", "netns", "add", self.netns)
        ns = ("ip", "-n", self.netns)
        _run(*ns, "link", "set", "lo", "up")
        _run(*ns, "link", "add", BRIDGE, "type", "bridge")
        _run(*ns, "addr", "add", f"{NODE_IP}/16", "dev", BRIDGE)
        _run(*ns, "link", "set", BRIDGE, "up")
        # Every address that is not local goes to the bridge, where only pods are:
        # the API server finds its advertise address, Service IPs get routed into
        # kube-proxy's rules, and nothing can leave.
        _run(*ns, "route", "add", "default", "dev", BRIDGE)

    def _cgroup_dirs(self) -> list[Path]:
        root = Path("/sys/fs/cgroup")
        if (root / "cgroup.controllers").exists():  # v2: one tree
            return [root / self.cgroup]
        return [
            d / self.cgroup
            for d in sorted(root.iterdir())
            if d.is_dir() and not d.is_symlink() and d.name != "unified"
        ]

    def _make_cgroups(self) -> None:
        """The node's cgroup root (kubelet's cgroupRoot) in every hierarchy."""
        for folder in self._cgroup_dirs():
            folder.mkdir(exist_ok=True)
            for key in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset starts empty
                parent = folder.parent / key
                if parent.exists() and not (folder / key).read_text().strip():
                    (folder / key).write_text(parent.read_text())

    def _save_state(self) -> None:
        state = {
            "netns": self.netns,
            "cgroup": self.cgroup,
            "token": self.token,
            "sysctls": self._sysctls,
            "created_dirs": self._created_dirs,
            "pids": {n: p.pid for n, p in self._procs.items()} or self.pids,
            "owner": os.getpid(),
            "detached": self.detached,
        }
        self._path(_STATE_FILE).write_text(json.dumps(state, indent=2))

    def _certificates(self) -> None:
        pki = self._path("pki")
        _openssl(
            pki, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7",
            "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=tfjob-node-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        _openssl(
            pki, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key",
            "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver",
        )  # fmt: skip
        names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 f"kubernetes.default.svc.{CLUSTER_DOMAIN}", "localhost"]  # fmt: skip
        san = ",".join(
            [f"IP:{ip}" for ip in (NODE_IP, KUBERNETES_SERVICE_IP, "127.0.0.1")]
            + [f"DNS:{n}" for n in names]
        )
        (pki / "apiserver.ext").write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
        )
        _openssl(
            pki, "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "7", "-extfile", "apiserver.ext", "-out", "apiserver.crt",
        )  # fmt: skip
        _openssl(pki, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                 "-out", "sa.key")  # fmt: skip
        _openssl(pki, "pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        ca_data = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "tfjob-node",
                    "cluster": {"server": SERVER, "certificate-authority-data": ca_data},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "admin@tfjob-node",
                    "context": {"cluster": "tfjob-node", "user": "admin", "namespace": "default"},
                }
            ],
            "current-context": "admin@tfjob-node",
        }
        self.kubeconfig_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig_path.chmod(0o600)
        tokens = pki / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        tokens.chmod(0o600)

    def _start_control_plane(self, assets: NodeAssets, deadline: float) -> None:
        cp, pki = assets.control_plane, self._path("pki")
        self._spawn(
            "etcd",
            [
                str(cp.etcd),
                f"--data-dir={self._path('etcd')}",
                "--listen-client-urls=http://127.0.0.1:2379",
                "--advertise-client-urls=http://127.0.0.1:2379",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=default=http://127.0.0.1:2380",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                str(cp.kube_apiserver),
                "--etcd-servers=http://127.0.0.1:2379",
                f"--secure-port={API_PORT}",
                "--bind-address=0.0.0.0",
                f"--advertise-address={NODE_IP}",
                f"--cert-dir={self._path('apiserver-certs')}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={pki / 'tokens.csv'}",
                # By IP: the node's name resolves nowhere (no resolver is asked).
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
            ],
        )
        self._wait("kube-apiserver", deadline, self._apiserver_ready)
        kubeconfig = str(self.kubeconfig_path)
        common = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        self._spawn(
            "kube-controller-manager",
            [
                str(cp.tool("kube-controller-manager")),
                *common,
                "--secure-port=10257",
                f"--cert-dir={self._path('controller-manager-certs')}",
                # Its defaults: service accounts, tokens, kube-root-ca.crt, EndpointSlices,
                # garbage collection, node lifecycle (the kubelet sends heartbeats) ...
                "--controllers=*",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--use-service-account-credentials=false",
                "--terminated-pod-gc-threshold=1000",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(cp.tool("kube-scheduler")),
                *common,
                "--secure-port=10259",
                f"--cert-dir={self._path('scheduler-certs')}",
            ],
        )

    def _containerd_config(self, assets: NodeAssets) -> str:
        c = self._path("containerd")
        runc_root = self._path("runc")
        return f"""\
version = 4
root = "{self._store / "root" if self._store else c / "root"}"
state = "{c / "state"}"
temp = "{c / "tmp"}"
imports = []
oom_score = 0
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs",
                    "io.containerd.mount-handler.v1.erofs"]

[debug]
  level = "warn"

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = "{self.containerd_socket}"
  [plugins.'io.containerd.server.v1.ttrpc']
    address = "{c / "containerd.sock.ttrpc"}"
  [plugins.'io.containerd.internal.v1.opt']
    path = "{c / "opt"}"
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "{self._path("s")}"
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{assets.pause_image}"
  [plugins.'io.containerd.cri.v1.runtime']
    # Without CAP_SYS_RESOURCE a sandbox at containerd's default -998 fails to start.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{assets.part("runc")}"
          Root = "{runc_root}"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{assets.part("cni")}"]
      conf_dir = "{self._path("cni", "net.d")}"
      max_conf_num = 1
"""

    def _start_containerd(self, assets: NodeAssets, deadline: float) -> None:
        self._store = _open_image_store(IMAGE_STORE / assets.folder.name)
        config = self._path("containerd", "config.toml")
        config.write_text(self._containerd_config(assets))
        (self._path("cni", "net.d") / "10-tfjob.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": self.netns,
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [
                                    [
                                        {
                                            "subnet": POD_SUBNET,
                                            "rangeStart": "10.88.1.1",
                                            "gateway": NODE_IP,
                                        }
                                    ]
                                ],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self._path("cni", "ipam")),
                            },
                        }
                    ],
                },
                indent=2,
            )
        )
        # containerd finds the shim on its PATH.
        env = {**os.environ, "PATH": f"{assets.part('containerd').parent}:{os.environ['PATH']}"}
        self._spawn("containerd", [str(assets.part("containerd")), f"--config={config}"], env=env)
        self._wait("containerd", deadline, lambda: self._ctr_ok())
        self.import_image(assets.part("pause.tar"))

    def _ctr_ok(self) -> bool:
        return self.ctr("version", check=False).returncode == 0

    def _start_kubelet(self, assets: NodeAssets) -> None:
        resolv = self._path("resolv.conf")
        resolv.write_text("")  # pods get the cluster DNS and nothing of the host's
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # The kernel here has cgroups v1 (kubelet 1.36 refuses it unless told).
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup}",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": True},
                "webhook": {"enabled": False},
                "x509": {},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [NODE_IP],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "podLogsDir": str(self.pod_logs_dir),
            # Without CAP_SYS_RESOURCE no process may lower its oom_score_adj.
            "oomScoreAdj": 0,
            "failSwapOn": False,
            "serializeImagePulls": False,
            # Imported images are never pulled again: never collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "evictionPressureTransitionPeriod": "5s",
            "shutdownGracePeriod": "0s",
            "rotateCertificates": False,
            "registerNode": True,
            "maxPods": 110,
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
            "logging": {"format": "text"},
        }
        path = self._path("kubelet.yaml")
        path.write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                str(assets.part("kubelet")),
                f"--config={path}",
                f"--kubeconfig={self.kubeconfig_path}",
                f"--root-dir={self._path('kubelet')}",
                f"--cert-dir={self._path('kubelet', 'pki')}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self, assets: NodeAssets) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(self.kubeconfig_path)},
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "clusterCIDR": POD_SUBNET,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            "oomScoreAdj": 0,
            # Leave the (global) conntrack table settings as they are.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        path = self._path("kube-proxy.yaml")
        path.write_text(yaml.safe_dump(config))
        self._spawn("kube-proxy", [str(assets.part("kube-proxy")), f"--config={path}"])

    def _start_coredns(self, assets: NodeAssets) -> None:
        corefile = self._path("Corefile")
        corefile.write_text(
            f""".:53 {{
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig_path} admin@tfjob-node
        pods insecure
        ttl 1
    }}
    cache 5 {{
        denial 9984 1
    }}
    loadbalance
}}
"""
        )
        self._spawn("coredns", [str(assets.part("coredns")), "-conf", str(corefile)])

    def _wait_ready(self, deadline: float) -> None:
        self._wait("kubelet", deadline, self._node_ready)
        self._wait("kube-controller-manager", deadline, self._default_service_account)
        name = f"kubernetes.default.svc.{CLUSTER_DOMAIN}"
        self._wait("coredns", deadline, lambda: dns_lookup(name) == [KUBERNETES_SERVICE_IP])
        self._wait("kube-proxy", deadline, self._service_routed)

    # -- readiness checks --------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One HTTPS request to the API server as admin: (status, decoded JSON)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(SERVER + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        context = ssl.create_default_context(cafile=str(self.ca_path))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        try:
            with opener.open(req, timeout=10) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def _apiserver_ready(self) -> bool:
        status, _ = self.request("GET", "/readyz")
        return status == 200 and self.request("GET", "/api/v1/namespaces/default")[0] == 200

    def _node_ready(self) -> bool:
        status, node = self.request("GET", f"/api/v1/nodes/{NODE_NAME}")
        if status != 200:
            return False
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _default_service_account(self) -> bool:
        sa = self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0]
        ca = self.request("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt")[0]
        return sa == 200 and ca == 200

    def _service_routed(self) -> bool:
        """kube-proxy's rules are in: the `kubernetes` Service's IP reaches the API."""
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.check_hostname = False
        with (
            socket.create_connection((KUBERNETES_SERVICE_IP, 443), timeout=2) as raw,
            context.wrap_socket(raw) as tls,
        ):
            return bool(tls.version())

    # -- images ------------------------------------------------------------------------

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return _run(
            str(self.assets.part("ctr")),
            "--address",
            str(self.containerd_socket),
            "--namespace",
            CONTAINERD_NAMESPACE,
            *args,
            check=check,
            timeout=timeout,
        )

    def import_image(self, archive: Path) -> None:
        """`ctr -n k8s.io images import` of an OCI or docker archive (kept from GC)."""
        self.ctr("images", "import", "--no-unpack=false", str(archive))

    def import_buildah_image(self, ref: str) -> float:
        """An image of buildah's storage into the node, unless the node's image store
        has it from the same buildah image ID; the seconds it took."""
        started = time.monotonic()
        found = _run("buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref)
        wanted = f"{_BUILDAH_ID_LABEL}={found.stdout.strip()}"
        if wanted in self._image_labels(ref):
            return time.monotonic() - started
        archive = self._path("import.tar")
        try:
            _run("buildah", "push", "--quiet", ref, f"docker-archive:{archive}:{ref}", timeout=900)
            self.import_image(archive)
        finally:
            archive.unlink(missing_ok=True)
        self.ctr("images", "label", ref, wanted)
        return time.monotonic() - started

    def _image_labels(self, ref: str) -> list[str]:
        """The labels (`key=value`) of the node's image `ref`; none when it has none."""
        for line in self.ctr("images", "ls").stdout.splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] == ref:
                return fields[-1].split(",")
        return []

    def _forget_containers(self) -> bool:
        """Every task, container and sandbox out of containerd's metadata (their
        processes are gone by now), so the image store keeps images only; whether
        containerd took it all."""
        done = True
        for kind, *remove in (
            ("tasks", "delete", "--force"),
            ("containers", "delete"),
            ("sandboxes", "rm", "--force"),
        ):
            listed = self.ctr(kind, "ls", check=False, timeout=60)  # a header, then IDs
            ids = [line.split()[0] for line in listed.stdout.splitlines()[1:] if line.split()]
            if listed.returncode != 0:
                done = False
            elif ids:
                removed = self.ctr(kind, *remove, *ids, check=False, timeout=120)
                done = done and removed.returncode == 0
        return done and not self.ctr("containers", "ls", "-q", check=False).stdout.split()

    def images(self) -> list[str]:
        return self.ctr("images", "ls", "-q").stdout.split()

    # -- logs --------------------------------------------------------------------------

    def log_tails(self, lines: int = 30) -> str:
        if self.folder is None:
            return "(node not running; no logs)"
        return "\n".join(
            f"----- {name} (last {lines} lines) -----\n"
            + _tail(self.log_dir / f"{name}.log", lines)
            for name in _PARTS
        )

    # -- processes ---------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.log_dir / f"{name}.log").open("ab")
        parent = os.getpid()
        preexec: Callable[[], None] | None = None
        if not self.detached:
            preexec = lambda: _die_with_parent(parent)  # noqa: E731
        try:
            self._procs[name] = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                env=env,
                start_new_session=True,
                preexec_fn=preexec,
            )
        finally:
            log.close()
        self.pids[name] = self._procs[name].pid

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool]) -> None:
        last = ""
        while time.monotonic() < deadline:
            for part, proc in self._procs.items():
                if proc.poll() is not None:
                    raise NodeError(
                        f"{part} exited with code {proc.returncode} while waiting for {name}\n"
                        + self.log_tails()
                    )
            try:
                if ready():
                    return
            except (OSError, ssl.SSLError, ValueError, KeyError) as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise NodeError(f"{name} not ready in time (last error: {last})\n" + self.log_tails())

    @property
    def running(self) -> bool:
        return bool(self.pids) and all(_alive(pid) for pid in self.pids.values())

    # -- stop --------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop everything and remove every trace (see the module docstring); what is
        left all the same (`traces`), which should be nothing."""
        if self.folder is None:
            return []
        folder = self.folder
        # 1. kubelet first (it would restart what we kill), then every container: the
        #    processes in the node's cgroups, and the shims (named by our socket dir).
        self._stop_part("kubelet")
        for _ in range(3):
            victims = set(_processes_with(self.cgroup)) | set(_processes_with(str(folder / "s")))
            victims |= set(_processes_with(str(self.containerd_socket)))
            victims -= set(self.pids.values())
            if not victims:
                break
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)
        # 2. containerd's image store left with images only, then the rest, in reverse
        #    start order; the store is marked clean once containerd has stopped.
        store, self._store = self._store, None
        clean = store is not None and "containerd" in self.pids and self._forget_containers()
        for name in reversed(_PARTS):
            self._stop_part(name)
        if store is not None and clean:
            (store / _STORE_CLEAN).touch()
        # 3. what they left on the machine.
        _unmount_all(folder)
        self._remove_cgroups()
        self._restore_sysctls()
        self._remove_host_files(folder)
        if self._netns_context is not None:
            self._netns_context.close()
            self._netns_context = None
        if self.netns:
            _run("ip", "netns", "delete", self.netns, check=False)
        self._remove_netns_folder()
        if not self.keep_folder:
            shutil.rmtree(folder, ignore_errors=True)
        self.folder = None
        if self._machine_lock is not None:
            os.close(self._machine_lock)  # closing the descriptor releases the lock
            self._machine_lock = None
        return self.traces(folder)

    def traces(self, folder: Path) -> list[str]:
        """What a node stopped from ``folder`` left on the machine."""
        found = []
        if Path(f"/run/netns/{self.netns}").exists():
            found.append(f"network namespace {self.netns}")
        if not self.keep_folder and folder.exists():
            found.append(f"folder {folder}")
        found += [f"mount {m}" for m in _mounts_under(folder)]
        found += [f"cgroup {d}" for d in self._cgroup_dirs() if d.exists()]
        found += [f"process {pid}" for pid in _processes_with(str(folder))]
        found += [f"process {pid} in cgroup" for pid in _processes_with(self.cgroup)]
        for name, value in self._sysctls.items():
            with contextlib.suppress(OSError):
                now = Path("/proc/sys", name).read_text().strip()
                if now != value:
                    found.append(f"sysctl {name} = {now}, was {value}")
        found += [f"host folder {d}" for d in self._created_dirs if Path(d).exists()]
        links = Path("/var/log/containers")
        if links.is_dir():
            found += [
                f"link {link}"
                for link in links.iterdir()
                if link.is_symlink() and os.readlink(link).startswith(str(folder))
            ]
        return found

    def _stop_part(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        pid = self.pids.pop(name, None)
        if proc is not None:
            terminate(proc)
        elif pid is not None and _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not _alive(pid):
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_dirs():
            if not top.exists():
                continue
            for _ in range(20):
                for here, dirs, _ in os.walk(top, topdown=False):
                    for d in dirs:
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(here, d))
                with contextlib.suppress(OSError):
                    top.rmdir()
                if not top.exists():
                    break
                time.sleep(0.2)

    def _restore_sysctls(self) -> None:
        for name, value in self._sysctls.items():
            with contextlib.suppress(OSError):
                path = Path("/proc/sys", name)
                if path.read_text().strip() != value:
                    path.write_text(value)

    def _remove_host_files(self, folder: Path) -> None:
        """The host paths kubelet, ip and CNI use whatever they are told: this node's
        /var/log/containers links and libcni result files go, and each of HOST_DIRS
        that did not exist before the start goes whole."""
        links = Path("/var/log/containers")
        if links.is_dir():
            for link in links.iterdir():
                with contextlib.suppress(OSError):
                    if link.is_symlink() and os.readlink(link).startswith(str(folder)):
                        link.unlink()
        results = Path("/var/lib/cni/results")
        if results.is_dir():
            for entry in results.iterdir():
                with contextlib.suppress(OSError, ValueError):
                    cached = json.loads(entry.read_text())
                    if str(cached.get("netns", "")).startswith(str(folder)):
                        entry.unlink()
        for made in self._created_dirs:
            path = Path(made)
            if not path.exists():
                continue
            if made != "/run/netns":  # that one goes after the namespace (stop())
                shutil.rmtree(path, ignore_errors=True)

    def _remove_netns_folder(self) -> None:
        """/run/netns, if the node made it: `ip netns add` made it a mount of itself.
        What is still in it then is the node's too (the folder was not there before
        it): a pod's network namespace whose sandbox containerd was still tearing down
        when it was stopped (seen under load), unmounted and removed first."""
        path = Path("/run/netns")
        if "/run/netns" not in self._created_dirs or not path.is_dir():
            return
        for leftover in path.iterdir():
            _libc().umount2(str(leftover).encode(), _MNT_DETACH)
            with contextlib.suppress(OSError):
                leftover.unlink()
        if not any(path.iterdir()):
            _libc().umount2(b"/run/netns", _MNT_DETACH)
            with contextlib.suppress(OSError):
                path.rmdir()

    # -- by hand -----------------------------------------------------------------------

    @classmethod
    def attach(cls, folder: Path) -> Node:
        """A node started (detached) by `up` in ``folder``, for `status` and `down`."""
        state = json.loads((folder / _STATE_FILE).read_text())
        node = cls(detached=True, keep_folder=False)
        node.folder = folder
        node.netns = state["netns"]
        node.cgroup = state["cgroup"]
        node.token = state["token"]
        node._sysctls = state["sysctls"]
        node._created_dirs = state["created_dirs"]
        node.pids = {k: int(v) for k, v in state["pids"].items()}
        return node

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: One node per machine: kubelet's fixed folders (HOST_DIRS) and the global sysctls
#: cannot be shared, so a second node (another pytest run, a worktree's) waits here.
MACHINE_LOCK = Path("/tmp/tfjob-node.lock")
MACHINE_LOCK_PATIENCE = 1800.0


def _take_machine_lock(patience: float) -> int:
    """An exclusive flock on MACHINE_LOCK, waited for up to `patience` seconds; the
    kernel drops it when the holder dies, so a killed run never blocks the next."""
    fd = os.open(MACHINE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise NodeError(f"another node held {MACHINE_LOCK} for {patience:.0f} s") from None
            time.sleep(1.0)


def reap_orphans() -> list[Path]:
    """Remove the nodes of test runs that died without stopping them (a killed pytest:
    its children died with it, but containers, mounts, cgroups and the namespace stay).
    Nodes started by hand (`up`) are left alone. Returns the folders reaped."""
    reaped = []
    for state in Path("/tmp").glob(f"tfn-*/{_STATE_FILE}"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            owner = json.loads(state.read_text())
            if owner.get("detached") or _alive(int(owner["owner"])):
                continue
            Node.attach(state.parent).stop()
            reaped.append(state.parent)
    return reaped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


# -- hand-run command ----------------------------------------------------------------------

DEFAULT_FOLDER = Path("/tmp/tfjob-node")


def main(argv: list[str] | None = None) -> int:
    """`up`, `status`, `down` of a node a developer runs by hand (tools/node/node.sh)."""
    import argparse

    parser = argparse.ArgumentParser(prog="tools/node/node.sh", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "status", "down"))
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    args = parser.parse_args(argv)
    folder: Path = args.folder
    if args.command == "up":
        if (folder / _STATE_FILE).exists():
            print(f"a node already runs from {folder} (tools/node/node.sh down)", file=sys.stderr)
            return 1
        node = Node(folder=folder, detached=True)
        try:
            node.start()
        except (NodeError, NodeUnavailable) as exc:
            print(exc, file=sys.stderr)
            return 1
        print(
            f"node up in {node.timings['node']:.1f} s "
            f"(control plane {node.timings['control plane']:.1f} s)"
        )
        print(f"network namespace: {node.netns}; folder: {folder}")
        print(f"kubectl: ip netns exec {node.netns} {node.assets.control_plane.tool('kubectl')} "
              f"--kubeconfig {node.kubeconfig_path} get pods -A")  # fmt: skip
        return 0
    if not (folder / _STATE_FILE).exists():
        print(f"no node in {folder}", file=sys.stderr)
        return 1 if args.command == "status" else 0
    node = Node.attach(folder)
    if args.command == "status":
        for name in _PARTS:
            pid = node.pids.get(name)
            state = "running" if pid and _alive(pid) else "stopped"
            print(f"{name:24} {state:8} pid {pid}")
        print(f"network namespace {node.netns}, folder {folder}, kubeconfig {node.kubeconfig_path}")
        return 0 if node.running else 1
    left = node.stop()
    if left:
        print(f"node in {folder} stopped; left behind: {', '.join(left)}", file=sys.stderr)
        return 1
    print(f"node in {folder} stopped and removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
