"""A real Kubernetes control plane (etcd + kube-apiserver) for the tests, without Docker.

The operator's Kubernetes behaviour is only worth testing against the real API server:
its validation, defaulting, CEL rules, RBAC, the status subresource and watch semantics
are what users get, and fakes drift from them. So, like controller-runtime's envtest,
this module starts a real etcd and a real kube-apiserver as child processes. On its
own it has no kubelet, scheduler or controller-manager (see ``testkit/kubelet.py``);
``testkit/cluster.py`` adds kube-scheduler, kube-controller-manager and kwok.

Binaries come from, in order: ``TEST_ASSET_KUBE_APISERVER`` / ``TEST_ASSET_ETCD``,
``KUBEBUILDER_ASSETS``, or ``tools/envtest/build.sh`` (which builds them from Go modules
into a version-keyed cache on first use). See docs/control-plane.md.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from testkit import fast_yaml
from testkit.helpers import free_port
from testkit.kept_alive import KeptConnections

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "tools" / "envtest" / "build.sh"

#: The identity the operator runs as in-cluster (manifests/base/service-account.yaml).
OPERATOR_USER = "system:serviceaccount:tfjob-system:tfjob-operator"
OPERATOR_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:tfjob-system")

#: Feature gates of native gang scheduling, for the API server and kube-scheduler.
GANG_FEATURE_GATES = "GenericWorkload=true,GangScheduling=true"

_PR_SET_PDEATHSIG = 1

_START_ATTEMPTS = 3


class ControlPlaneUnavailable(RuntimeError):
    """The binaries are missing and cannot be built here (no Go, no module proxy...).

    Callers decide whether that is a skip (a laptop without Go) or a failure (CI).
    """


class ControlPlaneError(RuntimeError):
    """The binaries exist but the control plane did not come up; the message has logs."""


#: The test cluster's other binaries (tools/envtest/build.sh builds them beside the
#: control plane, from the same k8s.io/kubernetes version where they come from it).
CLUSTER_TOOLS = (
    "kubectl",
    "kube-scheduler",
    "kube-controller-manager",
    "kwok",
    "training-operator",
    "kueue",
    "prometheus",
    "helm",
)


@dataclass(frozen=True)
class Assets:
    """Where the binaries are: the control plane's two, and the folder holding the rest."""

    kube_apiserver: Path
    etcd: Path
    folder: Path | None = None

    def tool(self, name: str) -> Path:
        """One of CLUSTER_TOOLS; ControlPlaneUnavailable if this folder lacks it."""
        found = _executable(self.folder / name) if self.folder else None
        if found is None:
            raise ControlPlaneUnavailable(
                f"{name} is not in {self.folder} (run tools/envtest/build.sh)"
            )
        return found


def _executable(path: str | os.PathLike[str] | None) -> Path | None:
    if not path:
        return None
    candidate = Path(path)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def find_assets(*, build: bool = True, build_timeout: float = 1800.0) -> Assets:
    """Locate the test cluster's binaries, building them if allowed and needed.

    The environment is honoured first so CI can hand in prebuilt binaries and never
    pay for the Go build: a ``KUBEBUILDER_ASSETS`` folder that holds every binary is
    used as it is. ``build=False`` only looks (environment, then the build cache
    through ``build.sh --no-build``), for callers that must not spend minutes here.
    Raises ControlPlaneUnavailable with a one-line reason when nothing works.
    """
    apiserver = _executable(os.environ.get("TEST_ASSET_KUBE_APISERVER"))
    etcd = _executable(os.environ.get("TEST_ASSET_ETCD"))
    assets_dir = os.environ.get("KUBEBUILDER_ASSETS")
    if assets_dir:
        folder = Path(assets_dir)
        apiserver = apiserver or _executable(folder / "kube-apiserver")
        etcd = etcd or _executable(folder / "etcd")
        if apiserver and etcd and all(_executable(folder / name) for name in CLUSTER_TOOLS):
            return Assets(apiserver, etcd, folder)
    return _run_build_script(build_timeout, build=build)


def _run_build_script(timeout: float, *, build: bool) -> Assets:
    """Run build.sh (a version check when the cache is warm) and read its answer."""
    if not BUILD_SCRIPT.is_file():
        raise ControlPlaneUnavailable(f"{BUILD_SCRIPT} is missing")
    folder = run_build_script(
        BUILD_SCRIPT, timeout, build=build, unavailable=ControlPlaneUnavailable
    )
    apiserver = _executable(folder / "kube-apiserver")
    etcd = _executable(folder / "etcd")
    if not (apiserver and etcd):
        raise ControlPlaneUnavailable(f"build.sh named {folder}, which lacks the binaries")
    return Assets(apiserver, etcd, folder)


def run_build_script(
    script: Path, timeout: float, *, build: bool, unavailable: type[Exception]
) -> Path:
    """Run one of tools/*/build.sh and return the folder its last stdout line names;
    raise `unavailable` with a reason fit for a skip when it cannot answer.

    The scripts exit 2 when Go is missing and 3 when --no-build found no cache, their
    last stderr line saying which; any other failure is a real build failure, whose
    whole output is kept in a file (its last line rarely says why)."""
    tool = script.parent.name  # "envtest", "node": the scripts' log prefix
    shown = f"tools/{tool}/build.sh"
    try:
        done = subprocess.run(
            ["bash", str(script), *([] if build else ["--no-build"])],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise unavailable(f"{shown} took over {timeout:.0f} s") from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].removeprefix(f"{tool}: ") if lines else f"exit {done.returncode}"
        if done.returncode not in (2, 3):
            log = Path(tempfile.gettempdir()) / f"tfjob-{tool}-build.log"
            log.write_text(done.stderr)
            reason += f" (full output: {log})"
        raise unavailable(f"{shown}: {reason}")
    return Path(done.stdout.strip().splitlines()[-1])


def terminate(proc: subprocess.Popen[Any] | None, timeout: float = 10.0) -> None:
    """SIGTERM a child that still runs; SIGKILL it if it has not exited in `timeout` s."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def has_default_route(route_table: str = "/proc/net/route") -> bool:
    """True if the IPv4 routing table has a usable default route.

    kube-apiserver derives its advertise address from the default route and refuses to
    start without one (sandboxes, some CI runners), so the caller then passes one.
    """
    try:
        lines = Path(route_table).read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        # Destination 0.0.0.0 and the RTF_UP flag (0x1).
        if len(fields) > 3 and fields[1] == "00000000" and int(fields[3], 16) & 0x1:
            return True
    return False


def _non_loopback_ipv4() -> str | None:
    """Some local non-loopback IPv4 address, found without any extra dependency."""
    import fcntl
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                packed = fcntl.ioctl(
                    sock.fileno(), siocgifaddr, struct.pack("256s", name[:15].encode())
                )
                address = socket.inet_ntoa(packed[20:24])
                if not address.startswith("127."):
                    return address
    return None


def _die_with_parent(parent_pid: int) -> None:
    """preexec_fn: have the kernel SIGKILL the child when the test process dies.

    Without this an interrupted or crashed pytest leaves etcd and kube-apiserver
    running forever. The check on the parent's pid closes the race where the parent
    died between fork() and prctl().
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except OSError:
        return ""


class _Certificates:
    """The CA, the serving certificate and the service-account key pair.

    The serving key is ECDSA P-256: every new connection's handshake has the API
    server sign with it, and an RSA-2048 signature cost ~5 % of a test API server's CPU
    (its profile: Go's modular arithmetic), P-256's a small fraction of that.

    We make our own CA instead of using the apiserver's self-signed certificate so the
    CA file exists before the apiserver starts and is stable for the whole session.
    openssl's command line is preferred (no Python dependency); the ``cryptography``
    package is the fallback for slim images without it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ca_cert = folder / "ca.crt"
        self.ca_key = folder / "ca.key"  # signs client certificates too (--client-ca-file)
        self.serving_cert = folder / "apiserver.crt"
        self.serving_key = folder / "apiserver.key"
        self.sa_key = folder / "sa.key"
        self.sa_pub = folder / "sa.pub"

    def generate(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if shutil.which("openssl"):
            self._with_openssl()
        else:
            self._with_cryptography()

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.folder)

    def _with_openssl(self) -> None:
        ca_key = self.ca_key
        csr = self.folder / "apiserver.csr"
        ext = self.folder / "apiserver.ext"
        self._openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(ca_key), "-out", str(self.ca_cert), "-subj", "/CN=tfjob-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip
        self._openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(self.serving_key), "-out", str(csr), "-subj", "/CN=kube-apiserver",
        )  # fmt: skip
        ext.write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid\n"
        )
        self._openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca_cert), "-CAkey", str(ca_key),
            "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(self.serving_cert),
        )  # fmt: skip
        self._openssl(
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
            "-out", str(self.sa_key),
        )  # fmt: skip
        self._openssl("pkey", "-in", str(self.sa_key), "-pubout", "-out", str(self.sa_pub))

    def _with_cryptography(self) -> None:
        try:
            import datetime
            import ipaddress

            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec, rsa
            from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
        except ImportError as exc:
            raise ControlPlaneUnavailable(
                "neither the openssl command nor the cryptography package is available"
            ) from exc

        def key_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
            return key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )

        now = datetime.datetime.now(datetime.UTC)
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tfjob-test-ca")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        serving_key = ec.generate_private_key(ec.SECP256R1())
        serving_cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name)
            .public_key(serving_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        self.ca_key.write_bytes(key_pem(ca_key))
        self.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
        self.serving_key.write_bytes(key_pem(serving_key))
        self.sa_key.write_bytes(key_pem(sa_key))
        self.sa_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


class ControlPlane:
    """etcd + kube-apiserver as child processes, torn down by ``stop()`` or the ``with``.

    After ``start()``:
      - ``server`` is ``https://127.0.0.1:<port>``; ``ca_path`` is the CA that signed
        its certificate;
      - ``token`` belongs to an admin in ``system:masters`` (bypasses RBAC), and
        ``kubeconfig_path`` is a kubeconfig using it;
      - ``operator_token`` / ``operator_kubeconfig_path`` authenticate as the operator's
        ServiceAccount (``OPERATOR_USER``), so RBAC from manifests/ is checked for real.
    Every start uses fresh temporary folders and free ports.
    """

    def __init__(
        self,
        assets: Assets | None = None,
        *,
        start_timeout: float = 60.0,
        keep_workdir: bool = False,
    ) -> None:
        self._assets = assets
        self.start_timeout = start_timeout
        self.keep_workdir = keep_workdir
        self.token = secrets.token_hex(24)
        self.operator_token = secrets.token_hex(24)
        self.workdir: Path | None = None
        self.server = ""
        self.etcd_url = ""
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._kept: tuple[str, KeptConnections] | None = None
        self._kubeconfig: Path | None = None
        self._operator_kubeconfig: Path | None = None
        self._certs: _Certificates | None = None
        self._apiserver_args: list[str] = []

    # -- public API --------------------------------------------------------------------

    @property
    def assets(self) -> Assets:
        """The binaries, resolved (and built if need be) on first use."""
        if self._assets is None:
            self._assets = find_assets()
        return self._assets

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.poll() is None

    @property
    def pids(self) -> dict[str, int]:
        """Process ids of the running etcd and kube-apiserver (for diagnostics)."""
        procs = {"etcd": self._etcd, "kube-apiserver": self._apiserver}
        return {name: p.pid for name, p in procs.items() if p is not None and p.poll() is None}

    @property
    def kubeconfig_path(self) -> Path:
        """Kubeconfig of the admin user (system:masters)."""
        if self._kubeconfig is None:
            raise RuntimeError("the control plane is not started")
        return self._kubeconfig

    @property
    def operator_kubeconfig_path(self) -> Path:
        """Kubeconfig of the operator's ServiceAccount identity; RBAC applies to it."""
        if self._operator_kubeconfig is None:
            raise RuntimeError("the control plane is not started")
        return self._operator_kubeconfig

    @property
    def ca_path(self) -> Path:
        if self._certs is None:
            raise RuntimeError("the control plane is not started")
        return self._certs.ca_cert

    @property
    def ca_key_path(self) -> Path:
        """The CA's key: client certificates it signs authenticate to the API server."""
        if self._certs is None:
            raise RuntimeError("the control plane is not started")
        return self._certs.ca_key

    @property
    def log_dir(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("the control plane is not started")
        return self.workdir / "logs"

    def start(self) -> ControlPlane:
        """Start etcd, then kube-apiserver; return once `default` namespace exists.

        Ports are chosen by binding to port 0, which can race with another process, so
        the whole start is retried (fresh folders, fresh ports) up to three times.
        """
        if self.running:
            return self
        assets = self.assets
        errors: list[str] = []
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once(assets)
                return self
            except ControlPlaneError as exc:
                # The message already carries the log tails; the folder can go.
                errors.append(f"attempt {attempt}: {exc}")
                self.stop()
        raise ControlPlaneError("\n\n".join(errors))

    def stop(self) -> None:
        """SIGTERM the apiserver, then etcd; SIGKILL what does not exit within 10 s."""
        self._stop_processes()
        if self.workdir is not None and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        self._kubeconfig = None
        self._operator_kubeconfig = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def restart_apiserver(self, down: float = 0.0) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd, `down`
        seconds later: what an upgrade or a crash of the API server looks like to its
        clients (connections reset, watches cut, then the same data)."""
        proc = self._apiserver
        if proc is None or not self._apiserver_args:
            raise RuntimeError("the control plane is not started")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        time.sleep(down)
        self._apiserver = self._spawn("kube-apiserver", self._apiserver_args)
        deadline = time.monotonic() + self.start_timeout
        self._wait("kube-apiserver", self._apiserver, deadline, self._apiserver_ready)

    def log_tails(self, lines: int = 40) -> str:
        """The last lines of the apiserver's and etcd's logs, for failure reports."""
        if self.workdir is None:
            return "(control plane not running; no logs)"
        parts = []
        for name in ("kube-apiserver", "etcd"):
            text = _tail(self.log_dir / f"{name}.log", lines)
            parts.append(f"----- {name} (last {lines} lines) -----\n{text}")
        return "\n".join(parts)

    def write_kubeconfig(self, path: Path, *, token: str, user: str = "admin") -> Path:
        """Write a kubeconfig for ``server`` with the CA inlined and a bearer token.

        Any Kubernetes client (lightkube, kubernetes, kubectl) reads it unchanged.
        """
        if self._certs is None:
            raise RuntimeError("the control plane is not started")
        ca_data = base64.b64encode(self._certs.ca_cert.read_bytes()).decode()
        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "tfjob-test",
                    "cluster": {"server": self.server, "certificate-authority-data": ca_data},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {
                    "name": f"{user}@tfjob-test",
                    "context": {"cluster": "tfjob-test", "user": user, "namespace": "default"},
                }
            ],
            "current-context": f"{user}@tfjob-test",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One raw HTTPS request to the apiserver, returning (status, decoded JSON).

        For checks that sit below any client library (``/version``, ``/readyz``, the
        Table rendering kubectl asks for). ``token=""`` sends no credentials at all.
        """
        data = json.dumps(body).encode() if body is not None else None
        sent = dict(headers or {})
        if token is None:
            token = self.token
        if token:
            sent.setdefault("Authorization", f"Bearer {token}")
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        status, raw = self._connections().send(method, path, data, sent)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    # -- internals ---------------------------------------------------------------------

    def _start_once(self, assets: Assets) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="tfjob-controlplane-"))
        (self.workdir / "logs").mkdir()
        self._certs = _Certificates(self.workdir / "pki")
        try:
            self._certs.generate()
        except subprocess.CalledProcessError as exc:
            raise ControlPlaneUnavailable(
                f"openssl failed: {exc.stderr.decode(errors='replace')}"
            ) from exc
        deadline = time.monotonic() + self.start_timeout

        client_port, peer_port, secure_port = free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self._etcd = self._spawn(
            "etcd",
            [
                str(assets.etcd),
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", self._etcd, deadline, self._etcd_healthy)

        tokens = self.workdir / "tokens.csv"
        tokens.write_text(
            f'{self.token},admin,admin-uid,"system:masters"\n'
            f'{self.operator_token},{OPERATOR_USER},tfjob-operator-uid,"{",".join(OPERATOR_GROUPS)}"\n'
        )
        tokens.chmod(0o600)
        self.server = f"https://127.0.0.1:{secure_port}"
        cert_dir = self.workdir / "apiserver-certs"
        cert_dir.mkdir()
        args = [
            str(assets.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={secure_port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={cert_dir}",
            f"--tls-cert-file={self._certs.serving_cert}",
            f"--tls-private-key-file={self._certs.serving_key}",
            f"--service-account-issuer=https://127.0.0.1:{secure_port}/",
            f"--service-account-key-file={self._certs.sa_pub}",
            f"--service-account-signing-key-file={self._certs.sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            f"--token-auth-file={tokens}",
            # Client certificates signed by the test CA authenticate too (credentials tests).
            f"--client-ca-file={self._certs.ca_cert}",
            # No controller-manager mints ServiceAccount tokens here, so the admission
            # plugin that insists on them would refuse every pod. TaintNodesByCondition
            # would give every new Node a not-ready:NoSchedule taint that, with no
            # node-lifecycle controller, nothing removes (kwok nodes, testkit/
            # cluster.py).
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            # Native gang scheduling (the Workload and PodGroup API, alpha in 1.36);
            # kube-scheduler runs with the same gates (testkit/cluster.py).
            f"--feature-gates={GANG_FEATURE_GATES}",
            "--runtime-config=scheduling.k8s.io/v1alpha2=true",
        ]
        if not has_default_route():
            # Without a default route the apiserver cannot pick an advertise address
            # and refuses to start. Nothing connects to that address here, and with
            # no endpoint reconciler it is never written into the `kubernetes`
            # Service; with no local address at all, a TEST-NET-1 one will do.
            args += [
                f"--advertise-address={_non_loopback_ipv4() or '192.0.2.1'}",
                "--endpoint-reconciler-type=none",
            ]
        self._apiserver_args = args
        self._apiserver = self._spawn("kube-apiserver", args)
        self._wait("kube-apiserver", self._apiserver, deadline, self._apiserver_ready)

        self._kubeconfig = self.write_kubeconfig(self.workdir / "kubeconfig", token=self.token)
        self._operator_kubeconfig = self.write_kubeconfig(
            self.workdir / "operator.kubeconfig", token=self.operator_token, user="tfjob-operator"
        )

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        assert self.workdir is not None
        log = (self.workdir / "logs" / f"{name}.log").open("ab")
        parent = os.getpid()
        try:
            return subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                # Own session: a Ctrl-C in the terminal reaches pytest, whose teardown
                # stops these in order, instead of killing etcd under the apiserver.
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
            )
        finally:
            log.close()

    def _wait(
        self,
        name: str,
        proc: subprocess.Popen[bytes],
        deadline: float,
        ready: Callable[[], bool],
    ) -> None:
        last_error = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} during start-up\n"
                    + self.log_tails()
                )
            try:
                if ready():
                    return
            except (OSError, ssl.SSLError, ValueError) as exc:
                last_error = repr(exc)
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{name} not ready within {self.start_timeout:.0f} s (last error: {last_error})\n"
            + self.log_tails()
        )

    def _connections(self) -> KeptConnections:
        """Kept-alive connections to this start's server (a restart keeps the port
        and certificates; a new start makes new ones)."""
        if self.workdir is None:
            raise RuntimeError("the control plane is not started")
        kept = self._kept
        if kept is None or kept[0] != self.server:
            kept = (self.server, KeptConnections(self.server, self.ca_path))
            self._kept = kept
        return kept[1]

    def _etcd_healthy(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.etcd_url + "/health", timeout=2) as resp:
            return bool(resp.status == 200 and json.loads(resp.read()).get("health") == "true")

    def _apiserver_ready(self) -> bool:
        # /readyz first (storage, informers, RBAC bootstrap), then the `default`
        # namespace, which a bootstrap controller creates a little later; tests that
        # create objects in `default` right away would otherwise race it.
        status, _ = self.request("GET", "/readyz")
        if status != 200:
            return False
        status, _ = self.request("GET", "/api/v1/namespaces/default")
        return status == 200

    def _stop_processes(self) -> None:
        for attr in ("_apiserver", "_etcd"):
            terminate(getattr(self, attr))
            setattr(self, attr, None)


# -- manifests -------------------------------------------------------------------------

MANIFESTS_BASE = REPO_ROOT / "manifests" / "base"
FIELD_MANAGER = "tfjob-tests"


def tfjob_resource() -> Any:
    """The lightkube generic resource class for kubeflow.org/v1 TFJob.

    It has ``.Status`` for the status subresource. lightkube keeps one class per kind
    in its registry, so every caller (tests and operator code alike) gets the same one.
    """
    from lightkube.generic_resource import create_namespaced_resource

    return create_namespaced_resource("kubeflow.org", "v1", "TFJob", "tfjobs")


def load_manifest(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of one manifest file, empty documents dropped."""
    with path.open() as handle:
        return [doc for doc in fast_yaml.load_all(handle) if doc]


def kustomization_files(base: Path = MANIFESTS_BASE) -> list[Path]:
    """The files ``kustomization.yaml`` lists, in its order (the order they apply in)."""
    kustomization = fast_yaml.load((base / "kustomization.yaml").read_text())
    return [base / name for name in kustomization.get("resources", [])]


def apply_documents(client: Any, docs: list[dict[str, Any]]) -> list[Any]:
    """Server-side apply each document, as ``kubectl apply --server-side`` would.

    ``client`` is a lightkube sync Client. Documents of kind TFJob are supported too
    (through ``tfjob_resource()``); any other custom kind needs its generic resource
    created first.
    """
    from lightkube import codecs

    tfjob_resource()
    applied = []
    for doc in docs:
        obj = codecs.from_dict(doc)
        applied.append(client.apply(obj, field_manager=FIELD_MANAGER, force=True))
    return applied
