"""Kueue's real manager beside the test cluster: job queueing, quotas, preemption.

``Kueue`` starts ``sigs.k8s.io/kueue/cmd/kueue`` (built by tools/envtest/build.sh, with
its CRDs and webhook manifests from the same module version in ``kueue-<v>/config/``)
against the session's control plane, as a child process like the scheduler and kwok:

- its CRDs are applied as upstream's kustomization makes them: the conversion webhook
  of the kinds that have one, pointed at Kueue's loopback address;
- its webhooks are served on 127.0.0.1 with a certificate signed by the control
  plane's CA (our own, not Kueue's internal certificate management, which makes
  certificates for a Service name the API server cannot reach here); the webhook
  configurations call ``https://127.0.0.1:<port>/<path>`` with that CA. Only
  Kueue's own webhooks and those of the kinds it is given (kubeflow.org/v1's, and
  Kubeflow Trainer's ``TrainJob``, ``trainer.kubeflow.org/trainjob``) are installed:
  the pod, Deployment and StatefulSet ones would put Kueue in the path of every pod
  the other tests create. The job webhooks skip kube-system and Kueue's namespace,
  as v0.19's kustomization has them;
- its configuration lists those kinds' integrations (``kubeflow.org/tfjob``, ...) in
  ``integrations.frameworks``: Kueue v0.19 no longer enables the deprecated Kubeflow
  v1 integration by default (its release configuration leaves it out), though it
  still builds it in. With ``external=True`` (for ``tfjob operator
  --kueue-integration=external``, where tfjob makes the kinds' Workloads) they are
  listed in ``integrations.externalFrameworks`` instead (``TFJob.v1.kubeflow.org``,
  ...), ``frameworks`` names none of them, and no kubeflow.org job webhook is
  installed: Kueue neither suspends nor mutates those jobs;
- with internal certificate management off, Kueue v0.19 reads its metrics certificate
  from the fixed path ``/etc/kueue/metrics/certs`` whether metrics are served or not.
  Rather than write there, Kueue runs in a private mount namespace (``unshare
  --mount``) whose ``/etc`` is a read-only overlay of the test's folder
  ``etc-layer/`` on the real ``/etc``: only that process sees the file, nothing is
  written outside the test's folder. That needs root (as the tests run in CI) or
  user namespaces (``unshare --user --map-root-user``), tried in that order;
- the visibility API server is off (``VisibilityOnDemand=false``): it too reads a
  fixed path (``/visibility``) and no test uses it.

Kueue manages only jobs labelled ``kueue.x-k8s.io/queue-name`` (its default), so the
other tests' jobs are untouched while it runs. See docs/control-plane.md.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace

from testkit import fast_yaml
from testkit.cluster import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION
from testkit.controlplane import (
    ControlPlane,
    ControlPlaneError,
    ControlPlaneUnavailable,
    _die_with_parent,
    _tail,
    apply_documents,
    terminate,
)
from testkit.helpers import IMAGE, bindable, free_port, wait_for
from tfjob.frameworks.registry import FRAMEWORKS

#: The label that puts a job in a LocalQueue, and the one that names its priority.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: Where Kueue keeps its own objects (leader election, MultiKueue secrets).
NAMESPACE = "kueue-system"
#: The webhook configurations, named as upstream's kustomization names them.
WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
#: Inside Kueue's mount namespace this folder holds the metrics certificate.
METRICS_CERTS = "kueue/metrics/certs"
KUEUE_GROUP = "kueue.x-k8s.io"
#: Kueue's objects in the version v0.19 stores and prefers (it still serves v1beta1,
#: deprecated).
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
GANG_API = "/apis/scheduling.k8s.io/v1alpha2"
#: Kubeflow Trainer v2's TrainJob: a kind Kueue integrates (``trainer.kubeflow.org/trainjob``)
#: that is not one of tfjob's kubeflow.org/v1 frameworks.
TRAINJOB = "TrainJob"
TRAINER_GROUP, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"


def api_of(kind: str) -> tuple[str, str, str]:
    """The kind's group, version and plural, as Kueue's webhook rules name them."""
    if kind == TRAINJOB:
        return TRAINER_GROUP, TRAINER_VERSION, "trainjobs"
    framework = FRAMEWORKS[kind]
    return framework.group, "v1", framework.plural


class Kueue:
    """Kueue's manager on a running ``ControlPlane``, managing the kubeflow.org ``kinds``
    (names of tfjob's frameworks: "TFJob", "PyTorchJob", ...; or ``TRAINJOB``, which
    needs JobSet's and Trainer's CRDs installed first, and never `external`).

    `wait_for_pods_ready`: Kueue's ``waitForPodsReady`` configuration, when not its
    default (30 min before an admitted job whose pods are not ready is evicted).

    ``start()`` installs the CRDs, starts the manager, waits until it is ready, then
    installs the webhook configurations and waits until they answer; ``stop()``
    removes the webhook configurations (so no later request waits on a stopped
    server) and stops the manager.
    """

    def __init__(
        self,
        plane: ControlPlane,
        kube: Client,
        binary: Path,
        kinds: tuple[str, ...],
        *,
        external: bool = False,
        wait_for_pods_ready: dict[str, Any] | None = None,
        multikueue: bool = False,
        start_timeout: float = 90.0,
    ) -> None:
        self.plane = plane
        self.kube = kube
        self.binary = binary
        self.kinds = kinds
        self.external = external
        self.wait_for_pods_ready = wait_for_pods_ready
        self.multikueue = multikueue
        self.apis = tuple(api_of(kind) for kind in kinds)
        self.start_timeout = start_timeout
        self.config_dir = config_dir_of(binary)
        self.webhook_port = 0
        self.health_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None

    # -- public API --------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        if self._folder is None:
            raise RuntimeError("Kueue is not started")
        return self._folder

    @property
    def log_path(self) -> Path:
        return self.plane.log_dir / "kueue.log"

    @property
    def frameworks(self) -> list[str]:
        """Kueue's built-in integration names: ``kubeflow.org/tfjob`` for TFJob.

        Listed in ``integrations.frameworks``: v0.19's default configuration leaves them out.
        Never in ``integrations.externalFrameworks`` as well: that list is for kinds
        whose Workloads another controller makes, and Kueue refuses a configuration
        naming a kind in both ("Duplicate value"). None when `external`."""
        if self.external:
            return []
        return [f"{api_of(kind)[0]}/{kind.lower()}" for kind in self.kinds]

    @property
    def external_frameworks(self) -> list[str]:
        """``integrations.externalFrameworks`` when `external`: ``TFJob.v1.kubeflow.org``
        for TFJob (Kind.version.group), the kinds whose Workloads tfjob makes."""
        if not self.external:
            return []
        return [f"{kind}.v1.{FRAMEWORKS[kind].group}" for kind in self.kinds]

    @property
    def multikueue_frameworks(self) -> list[dict[str, str]]:
        """``multiKueue.externalFrameworks`` when `multikueue` (and `external`): the
        same names, so that MultiKueue dispatches those kinds through its generic
        adapter, which reads ``spec.managedBy`` and copies the whole status back."""
        if not self.multikueue:
            return []
        return [{"name": name} for name in self.external_frameworks]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Kueue:
        if self.running:
            return self
        if self.plane.workdir is None:
            raise RuntimeError("start the control plane first")
        if not (self.config_dir / "crd" / "bases").is_dir():
            raise ControlPlaneUnavailable(
                f"Kueue's CRDs are not beside its binary ({self.config_dir}); "
                "run tools/envtest/build.sh"
            )
        self._folder = self.plane.workdir / "kueue"
        self._folder.mkdir(exist_ok=True)
        self.webhook_port, self.health_port = self._webhook_port(), free_port()
        deadline = time.monotonic() + self.start_timeout
        try:
            self._certificates()
            self._namespace()
            self._install_crds()
            self._spawn()
            self._wait(deadline, self._ready, "its /readyz")
            self._install_webhooks()
            self._wait(deadline, self._webhooks_answer, "its webhooks")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for kind, name in WEBHOOK_CONFIGURATIONS.items():
            resource = (
                MutatingWebhookConfiguration
                if kind == "MutatingWebhookConfiguration"
                else ValidatingWebhookConfiguration
            )
            with contextlib.suppress(ApiError, OSError):
                self.kube.delete(resource, name)
        proc, self._proc = self._proc, None
        terminate(proc)

    def restart(self, *, external: bool) -> None:
        """Restarted with the kinds moved between ``frameworks`` and
        ``externalFrameworks`` (its kubeflow.org job webhooks installed or not), as an
        administrator moves a cluster between tfjob's two Kueue modes."""
        self.stop()
        self.external = external
        self.start()

    def __enter__(self) -> Kueue:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        return f"----- kueue (last {lines} lines) -----\n" + _tail(self.log_path, lines)

    # -- internals ---------------------------------------------------------------------

    def _certificates(self) -> None:
        """A serving certificate for 127.0.0.1 signed by the control plane's CA, in the
        webhook's certDir and in the layer that becomes /etc/kueue/metrics/certs."""
        certs = self.folder / "webhook-certs"
        certs.mkdir(exist_ok=True)
        key, cert = certs / "tls.key", certs / "tls.crt"
        csr, ext = self.folder / "kueue.csr", self.folder / "kueue.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        )
        if shutil.which("openssl") is None:
            raise ControlPlaneUnavailable("Kueue's certificate needs the openssl command")
        for args in (
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
             "-subj", "/CN=kueue-webhook"],
            ["x509", "-req", "-in", str(csr), "-CA", str(self.plane.ca_path),
             "-CAkey", str(self.plane.ca_key_path), "-CAcreateserial", "-days", "2",
             "-extfile", str(ext), "-out", str(cert)],
        ):  # fmt: skip
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.folder)
        metrics = self.folder / "etc-layer" / METRICS_CERTS
        metrics.mkdir(parents=True, exist_ok=True)
        shutil.copy(key, metrics / "tls.key")
        shutil.copy(cert, metrics / "tls.crt")

    def _webhook_port(self) -> int:
        """The webhook port of the last Kueue on this control plane, if it is free again:
        the conversion webhooks of five of Kueue's CRDs name it, so a Kueue started
        again (the next test file, a restart) applies them unchanged, and the API
        server does not rebuild their handlers and OpenAPI (about 0.4 CPU-s a CRD).
        `free_port` hands a port out once per process and below the range outgoing
        connections take theirs from, so it stays free while this Kueue is stopped."""
        saved = self.folder / "webhook-port"
        with contextlib.suppress(OSError, ValueError):
            port = int(saved.read_text())
            if bindable(port, reuse_address=True):  # as Kueue (Go) listens
                return port
        port = free_port()
        saved.write_text(str(port))
        return port

    def _namespace(self) -> None:
        with contextlib.suppress(ApiError):
            self.kube.create(codecs.from_dict(_namespace_manifest()))
        self.kube.get(Namespace, NAMESPACE)

    def _client_config(self, path: str) -> dict[str, str]:
        ca = base64.b64encode(self.plane.ca_path.read_bytes()).decode()
        return {"url": f"https://127.0.0.1:{self.webhook_port}{path}", "caBundle": ca}

    def _install_crds(self) -> None:
        install_crds(self.kube, self.config_dir, conversion=self._client_config("/convert"))

    def _config(self) -> Path:
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.folder / "webhook-certs"),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 100, "burst": 200},
            "integrations": self._integrations(),
            "featureGates": {"VisibilityOnDemand": False},
        }
        if self.wait_for_pods_ready is not None:
            config["waitForPodsReady"] = self.wait_for_pods_ready
        if self.multikueue_frameworks:
            config["multiKueue"] = {"externalFrameworks": self.multikueue_frameworks}
        path = self.folder / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _integrations(self) -> dict[str, list[str]]:
        if self.external:
            return {"frameworks": self.frameworks, "externalFrameworks": self.external_frameworks}
        return {"frameworks": self.frameworks}

    def _command(self, config: Path) -> list[str]:
        """Kueue in a private mount namespace whose /etc carries the metrics certs."""
        layer = self.folder / "etc-layer"
        mount = f'mount -t overlay overlay -o "lowerdir={layer}:/etc" /etc && exec "$0" "$@"'
        kueue = [
            str(self.binary),
            f"--config={config}",
            f"--kubeconfig={self.plane.kubeconfig_path}",
        ]
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ControlPlaneUnavailable("Kueue's mount namespace needs unshare (util-linux)")
        as_user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        return [unshare, *as_user, "--mount", "--propagation", "private",
                "sh", "-c", mount, *kueue]  # fmt: skip

    def _spawn(self) -> None:
        args = self._command(self._config())
        parent = os.getpid()
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
            )

    def _ready(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError:
            return False

    def _install_webhooks(self) -> None:
        """Upstream's webhook configurations, calling Kueue on loopback, for Kueue's own
        kinds and the kubeflow.org kinds it manages here."""
        manifests = self.config_dir / "webhook" / "manifests.yaml"
        docs = []
        for doc in fast_yaml.load_all(manifests.read_text()):
            if not doc:
                continue
            out = copy.deepcopy(doc)
            out["metadata"] = {"name": WEBHOOK_CONFIGURATIONS[doc["kind"]]}
            out["webhooks"] = []
            for hook in doc["webhooks"]:
                if not self._wanted(hook):
                    continue
                hook = copy.deepcopy(hook)
                hook["clientConfig"] = self._client_config(hook["clientConfig"]["service"]["path"])
                if not _is_kueue_hook(hook):
                    hook["namespaceSelector"] = _JOB_HOOK_NAMESPACES
                out["webhooks"].append(hook)
            docs.append(out)
        apply_documents(self.kube, docs)

    def _wanted(self, hook: dict[str, Any]) -> bool:
        if _is_kueue_hook(hook):
            return True
        if self.external:
            return False
        return any(
            group in rule["apiGroups"]
            and version in rule["apiVersions"]
            and plural in rule["resources"]
            for rule in hook["rules"]
            for group, version, plural in self.apis
        )

    def _webhooks_answer(self) -> bool:
        """A server-side dry run through the mutating webhook: Kueue suspends a queued
        job at creation, so a job that comes back suspended went through it. When
        `external` (no job webhook), a ResourceFlavor's dry run (its webhook fails
        closed, so a 201 means Kueue answered)."""
        if self.external:
            status, _ = self.plane.request(
                "POST",
                f"{KUEUE_API}/resourceflavors?dryRun=All",
                body={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                      "metadata": {"name": "kueue-probe"}},
            )  # fmt: skip
            return bool(status == 201)
        for kind in self.kinds:
            group, version, plural = api_of(kind)
            status, body = self.plane.request(
                "POST",
                # Not in NAMESPACE: Kueue leaves the jobs of its own namespace alone.
                f"/apis/{group}/{version}/namespaces/default/{plural}?dryRun=All",
                body=_probe_job(kind),
            )
            if status != 201 or not _suspended(kind, body):
                return False
        return True

    def _wait(self, deadline: float, ready: Any, what: str) -> None:
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ControlPlaneError(
                    f"kueue exited with code {self._proc.returncode} during start-up\n"
                    + self.log_tail()
                )
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"kueue: {what} not ready within {self.start_timeout:.0f} s\n" + self.log_tail()
        )


@dataclass
class Worker:
    """A MultiKueue worker cluster: its control plane, an admin client, its Kueue."""

    plane: ControlPlane
    kube: Client
    kueue: Kueue


def install_crds(
    kube: Client, config_dir: Path, *, conversion: dict[str, str] | None = None
) -> None:
    """Kueue's CRDs from ``config_dir`` (``kueue-<v>/config``), applied and Established.

    With `conversion` (a webhook clientConfig), the CRDs upstream's kustomization
    patches with a conversion webhook get one calling it; without, they convert
    nothing (enough for a cluster that only stores Kueue's objects, such as a
    MultiKueue worker whose Kueue is not running)."""
    crd_dir = config_dir / "crd"
    kustomization = fast_yaml.load((crd_dir / "kustomization.yaml").read_text())
    converted = set()
    for patch in kustomization.get("patches") or []:
        doc = fast_yaml.load((crd_dir / patch["path"]).read_text())
        if (doc.get("spec") or {}).get("conversion", {}).get("strategy") == "Webhook":
            converted.add(doc["metadata"]["name"])
    docs = []
    for resource in kustomization["resources"]:
        doc = fast_yaml.load((crd_dir / resource).read_text())
        if conversion is not None and doc["metadata"]["name"] in converted:
            doc["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": conversion, "conversionReviewVersions": ["v1"]},
            }
        docs.append(doc)
    apply_documents(kube, docs)
    for doc in docs:
        _wait_established(kube, doc["metadata"]["name"])


def config_dir_of(binary: Path) -> Path:
    """Where build.sh put Kueue's manifests: ``config/`` beside the real binary."""
    return binary.resolve().parent / "config"


#: Where the job webhooks apply: upstream's v0.19 kustomization gives every job kind's
#: webhook the pod webhook's selector, so the API server never calls Kueue for the jobs
#: of kube-system or of Kueue's own namespace (which Kueue leaves alone anyway).
_JOB_HOOK_NAMESPACES = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", NAMESPACE],
        }
    ]
}


def _is_kueue_hook(hook: dict[str, Any]) -> bool:
    """A webhook for Kueue's own kinds (ClusterQueue, Workload, ...), not a job's."""
    return any(KUEUE_GROUP in rule["apiGroups"] for rule in hook["rules"])


def _namespace_manifest() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def _suspended(kind: str, job: dict[str, Any]) -> bool:
    spec = job["spec"] if kind == TRAINJOB else job["spec"]["runPolicy"]
    return bool(spec.get("suspend"))


def _probe_job(kind: str) -> dict[str, Any]:
    """A minimal queued job of `kind`: one replica of its first replica type (Kueue's
    webhook reads the queue label and the replica templates); a TrainJob names
    ``torch-distributed``, a runtime Trainer ships: Kueue's validating webhook refuses a
    TrainJob whose runtime does not exist (it builds the pod sets to check them)."""
    labels = {QUEUE_LABEL: "probe"}
    if kind == TRAINJOB:
        return {
            "apiVersion": f"{TRAINER_GROUP}/{TRAINER_VERSION}",
            "kind": kind,
            "metadata": {"name": "kueue-probe", "labels": labels},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    framework = FRAMEWORKS[kind]
    container = {"name": framework.container_name, "image": "probe"}
    replica = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": framework.api_version,
        "kind": kind,
        "metadata": {"name": "kueue-probe", "labels": labels},
        "spec": {framework.spec_field: {framework.replica_types[0]: replica}},
    }


def _wait_established(kube: Client, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = kube.get(CustomResourceDefinition, name)
        conditions = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise TimeoutError(f"CRD {name} not Established within {timeout:.0f} s")


# -- Kueue's objects -------------------------------------------------------------------


@dataclass
class Queues:
    """Kueue's objects for one test; ``cleanup()`` deletes them (cluster-scoped ones
    are named uniquely, so tests never share them)."""

    plane: ControlPlane
    namespace: str
    made: list[str] = field(default_factory=list)

    def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        # Strict: a field the API version does not have is an error, not dropped.
        status, answer = self.plane.request("POST", f"{path}?fieldValidation=Strict", body=body)
        assert status == 201, f"POST {path}: {status} {answer}"
        self.made.append(f"{path}/{body['metadata']['name']}")
        created: dict[str, Any] = answer
        return created

    def unique(self, stem: str) -> str:
        return f"{stem}-{secrets.token_hex(3)}"

    def flavor(self, stem: str = "default", **spec: Any) -> str:
        name = self.unique(stem)
        self._create(
            f"{KUEUE_API}/resourceflavors",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
             "metadata": {"name": name}, "spec": spec},
        )  # fmt: skip
        return name

    def cluster_queue(
        self, *, cpu: str, flavor: str | None = None, preemption: dict[str, Any] | None = None,
        admission_checks: list[str] | None = None,
    ) -> str:  # fmt: skip
        """A ClusterQueue with `cpu` of nominal quota (and memory enough for anything)."""
        name = self.unique("cq")
        resources = [
            {"name": "cpu", "nominalQuota": cpu},
            {"name": "memory", "nominalQuota": "64Gi"},
        ]
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": flavor or self.flavor(), "resources": resources}],
                }
            ],
        }
        if preemption:
            spec["preemption"] = preemption
        if admission_checks:
            strategy = [{"name": check} for check in admission_checks]
            spec["admissionChecksStrategy"] = {"admissionChecks": strategy}
        self._create(
            f"{KUEUE_API}/clusterqueues",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
             "metadata": {"name": name}, "spec": spec},
        )  # fmt: skip
        return name

    def local_queue(self, cluster_queue: str, name: str = "queue") -> str:
        """A LocalQueue in the test's namespace, once its ClusterQueue is active."""
        self._create(
            f"{KUEUE_API}/namespaces/{self.namespace}/localqueues",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": name, "namespace": self.namespace},
             "spec": {"clusterQueue": cluster_queue}},
        )  # fmt: skip
        return name

    def wait_active(self, cluster_queue: str) -> None:
        def active() -> bool:
            cq = self.get(f"{KUEUE_API}/clusterqueues/{cluster_queue}")
            return cq is not None and _condition(cq, "Active") == "True"

        wait_for(active, timeout=30, message=f"ClusterQueue {cluster_queue} Active")

    def queue(self, *, cpu: str, **cluster_queue: Any) -> str:
        """A LocalQueue on a new, active ClusterQueue with `cpu` of quota."""
        cq = self.cluster_queue(cpu=cpu, **cluster_queue)
        self.wait_active(cq)
        return self.local_queue(cq)

    def priority_class(self, stem: str, value: int) -> str:
        name = self.unique(stem)
        self._create(
            f"{KUEUE_API}/workloadpriorityclasses",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
             "metadata": {"name": name}, "value": value},
        )  # fmt: skip
        return name

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._create(path, body)

    def get(self, path: str) -> dict[str, Any] | None:
        status, body = self.plane.request("GET", path)
        if status == 404:
            return None
        assert status == 200, f"GET {path}: {status} {body}"
        found: dict[str, Any] = body
        return found

    def cleanup(self) -> None:
        """Namespaced objects go with the namespace; the rest newest first (a
        ClusterQueue before its flavour: Kueue's finalizers hold the ones in use)."""
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                self.plane.request("DELETE", path)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            status: str = entry["status"]
            return status
    return None


# -- the test's jobs, of any kind -------------------------------------------------------


def replicas_of(kind: str, pods: int) -> dict[str, int]:
    """`pods` pods of `kind`, as replica counts: TFJob all Workers; a kind with a
    Master (PyTorchJob) or a Launcher (MPIJob) one of it and the rest Workers."""
    framework = FRAMEWORKS[kind]
    if "Launcher" in framework.replica_types:  # MPIJob: one Launcher, the rest Workers
        return {"Launcher": 1, "Worker": pods - 1} if pods > 1 else {"Launcher": 1}
    if "Master" in framework.replica_types and kind != "TFJob":
        return {"Master": 1, "Worker": pods - 1} if pods > 1 else {"Master": 1}
    return {"Worker": pods}


@dataclass
class QueuedJobs:
    """The test's jobs of one kind, read and written through the raw API."""

    plane: ControlPlane
    namespace: str
    kind: str
    #: Given to every pod template (a lane's, see Nodes' ``taint``).
    tolerations: tuple[dict[str, str], ...] = ()

    @property
    def framework(self) -> Any:
        return FRAMEWORKS[self.kind]

    @property
    def path(self) -> str:
        return f"/apis/kubeflow.org/v1/namespaces/{self.namespace}/{self.framework.plural}"

    def manifest(
        self,
        name: str,
        pods: int = 4,
        *,
        cpu: str = "1",
        queue: str | None = None,
        priority: str | None = None,
        run_for: str | None = None,
        run_policy: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`pods` pods of `cpu` each; with `run_for` every pod ends (exit 0) that long
        after it starts, else it runs until the test ends it."""
        annotations = {EXIT_CODE_ANNOTATION: "0", RUN_FOR_ANNOTATION: run_for} if run_for else {}
        container = {
            "name": self.framework.container_name,
            "image": IMAGE,
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
        }
        pod_spec: dict[str, Any] = {"containers": [container]}
        if self.tolerations:
            pod_spec["tolerations"] = list(self.tolerations)
        specs = {
            rtype: {
                "replicas": count,
                "restartPolicy": "Never",
                "template": {"metadata": {"annotations": annotations}, "spec": {**pod_spec}},
            }
            for rtype, count in replicas_of(self.kind, pods).items()
        }
        labels = {}
        if queue:
            labels[QUEUE_LABEL] = queue
        if priority:
            labels[PRIORITY_LABEL] = priority
        spec: dict[str, Any] = {self.framework.spec_field: specs}
        if run_policy:
            spec["runPolicy"] = run_policy
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": self.kind,
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": spec,
        }

    def create(self, name: str, pods: int = 4, **options: Any) -> dict[str, Any]:
        return self.submit(self.manifest(name, pods, **options))

    def submit(self, manifest: dict[str, Any]) -> dict[str, Any]:
        status, body = self.plane.request(
            "POST", f"{self.path}?fieldValidation=Strict", body=manifest
        )
        assert status == 201, f"create {manifest['metadata']['name']}: {status} {body}"
        created: dict[str, Any] = body
        return created

    def get(self, name: str) -> dict[str, Any]:
        status, body = self.plane.request("GET", f"{self.path}/{name}")
        assert status == 200, f"GET {self.kind} {name}: {status} {body}"
        found: dict[str, Any] = body
        return found

    def patch(self, name: str, patch: dict[str, Any], subresource: str = "") -> tuple[int, Any]:
        return self.plane.request(
            "PATCH",
            f"{self.path}/{name}{subresource}",
            body=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )

    def suspended(self, name: str) -> bool:
        return bool(self.get(name)["spec"].get("runPolicy", {}).get("suspend"))

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        for entry in (self.get(name).get("status") or {}).get("conditions") or []:
            if entry["type"] == kind and entry["status"] == "True":
                found: dict[str, Any] = entry
                return found
        return None

    def wait_condition(self, name: str, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        return wait_for(
            lambda: self.condition(name, kind),
            timeout,
            interval=0.1,
            message=f"{kind}=True on {self.kind} {name}",
        )

    def _list(self, api: str, resource: str, name: str) -> dict[str, dict[str, Any]]:
        status, body = self.plane.request(
            "GET",
            f"{api}/namespaces/{self.namespace}/{resource}?labelSelector={JOB_NAME_LABEL}={name}",
        )
        assert status == 200, body
        return {o["metadata"]["name"]: o for o in body["items"]}

    def pods(self, name: str) -> dict[str, dict[str, Any]]:
        """The job's pods, terminating ones included."""
        return self._list("/api/v1", "pods", name)

    def services(self, name: str) -> dict[str, dict[str, Any]]:
        return self._list("/api/v1", "services", name)

    def running_pods(
        self, name: str, count: int, timeout: float = 30.0
    ) -> dict[str, dict[str, Any]]:
        """Until the job has exactly `count` pods, each bound and Running."""

        def running() -> dict[str, dict[str, Any]] | None:
            pods = self.pods(name)
            ok = [
                p for p in pods.values()
                if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ]  # fmt: skip
            return pods if len(pods) == count and len(ok) == count else None

        return wait_for(running, timeout, interval=0.1, message=f"{count} Running pods of {name}")

    def gang_groups(self, name: str) -> list[str]:
        """The job's native gang objects (Workload and PodGroup of scheduling.k8s.io)."""
        found = []
        for resource in ("workloads", "podgroups"):
            status, _ = self.plane.request(
                "GET", f"{GANG_API}/namespaces/{self.namespace}/{resource}/{name}"
            )
            if status == 200:
                found.append(f"{resource}/{name}")
        return found

    def pending_for_quota(self, name: str) -> dict[str, Any] | None:
        """Kueue's verdict on a job's Workload it cannot admit: QuotaReserved False,
        Pending (None until then)."""
        reserved = workload_condition(self.workload(name), "QuotaReserved")
        if reserved and reserved["status"] == "False" and reserved["reason"] == "Pending":
            return reserved
        return None

    def workload(self, name: str) -> dict[str, Any] | None:
        """Kueue's Workload for the job (the one its controller owner reference names)."""
        status, body = self.plane.request(
            "GET", f"{KUEUE_API}/namespaces/{self.namespace}/workloads"
        )
        assert status == 200, body
        for item in body["items"]:
            for owner in item["metadata"].get("ownerReferences") or []:
                if owner["kind"] == self.kind and owner["name"] == name:
                    found: dict[str, Any] = item
                    return found
        return None

    def end_pods(self, name: str, exit_code: int = 0) -> None:
        """Every running pod of the job exits with `exit_code` (the kwok stages)."""
        for pod in self.pods(name):
            status, body = self.plane.request(
                "PATCH",
                f"/api/v1/namespaces/{self.namespace}/pods/{pod}",
                body={"metadata": {"annotations": {EXIT_CODE_ANNOTATION: str(exit_code)}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert status in (200, 404), body


def workload_condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    if workload is None:
        return None
    for entry in (workload.get("status") or {}).get("conditions") or []:
        if entry["type"] == kind:
            found: dict[str, Any] = entry
            return found
    return None
