"""A controller-runtime manager beside the test cluster, its webhooks served on loopback.

JobSet's and Kubeflow Trainer's managers (testkit/jobset.py, testkit/trainer.py) run as
child processes of the tests, like Kueue's (docs/decisions/0022): the test cluster has
no Service network, so the API server can call a webhook only at 127.0.0.1. Each
manager therefore runs with its own certificate management off and serves its
webhooks on 127.0.0.1 with a certificate the control plane's CA signs; upstream's
webhook configurations (the manifests build.sh copied beside the binary, with their
kustomization's JSON patches) are installed with each ``clientConfig`` turned into
``url: https://127.0.0.1:<port><path>`` and that CA. ``stop()`` removes them before
it stops the manager, so no later request waits on a server that is gone.

A subclass says what differs: its configuration file, its CRDs, how its webhook
configurations are named, and how to tell that its webhooks answer.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

import yaml
from lightkube import ApiError, Client
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from testkit import fast_yaml
from testkit.controlplane import (
    ControlPlane,
    ControlPlaneError,
    ControlPlaneUnavailable,
    _die_with_parent,
    _tail,
    apply_documents,
    terminate,
)
from testkit.helpers import free_port

_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


class LoopbackManager:
    """One manager binary on a running ``ControlPlane``; ``start()`` returns once it is
    ready and its webhooks answer, ``stop()`` undoes what ``start()`` did to the
    cluster except the CRDs (the objects of other tests may still be stored in them)."""

    #: The log file's and the work folder's name.
    name: ClassVar[str] = "manager"

    def __init__(
        self, plane: ControlPlane, kube: Client, binary: Path, *, start_timeout: float = 90.0
    ) -> None:
        self.plane = plane
        self.kube = kube
        self.binary = binary
        self.start_timeout = start_timeout
        #: Where build.sh copied the manifests of the binary's module version.
        self.config_dir = binary.resolve().parent / "config"
        self.webhook_port = 0
        self.health_port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None
        self._installed: list[tuple[str, str]] = []

    # -- what a subclass says ----------------------------------------------------------

    def configuration(self) -> dict[str, Any]:
        """The manager's configuration file (ports, certificates, leader election)."""
        raise NotImplementedError

    def crds(self) -> list[dict[str, Any]]:
        """The CRDs to install before the manager starts."""
        raise NotImplementedError

    def webhook_dir(self) -> Path:
        """The copied folder holding the webhook kustomization."""
        raise NotImplementedError

    def webhook_name(self, upstream: str) -> str:
        """The installed name of an upstream webhook configuration (after its patches)."""
        return upstream

    def environment(self) -> dict[str, str]:
        """Variables added to the manager's environment."""
        return {}

    def started(self) -> bool:
        """Besides /readyz: the manager has started what the tests rely on."""
        return True

    def webhooks_answer(self) -> bool:
        """The API server reaches the webhooks (checked after they are installed)."""
        raise NotImplementedError

    def populate(self, deadline: float) -> None:
        """Objects to create once the webhooks answer (so that they pass through them)."""

    # -- public API --------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        if self._folder is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._folder

    @property
    def log_path(self) -> Path:
        return self.plane.log_dir / f"{self.name}.log"

    @property
    def cert_dir(self) -> Path:
        """The folder holding the webhook server's ``tls.crt`` and ``tls.key``."""
        return self.folder / "webhook-certs"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        if self.running:
            return self
        if self.plane.workdir is None:
            raise RuntimeError("start the control plane first")
        if not (self.config_dir / ".complete").is_file():
            raise ControlPlaneUnavailable(
                f"{self.name}'s manifests are not beside its binary ({self.config_dir}); "
                "run tools/envtest/build.sh"
            )
        self._folder = self.plane.workdir / self.name
        self._folder.mkdir(exist_ok=True)
        self.webhook_port, self.health_port = free_port(), free_port()
        deadline = time.monotonic() + self.start_timeout
        try:
            serving_certificate(self.plane, self.cert_dir)
            install_crds(self.kube, self.crds())
            self._spawn()
            self.wait_until(deadline, self._ready, "its /readyz")
            self.wait_until(deadline, self.started, "its controllers")
            self._install_webhooks()
            self.wait_until(deadline, self.webhooks_answer, "its webhooks")
            self.populate(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for kind, name in self._installed:
            with contextlib.suppress(ApiError, OSError):
                if kind == "MutatingWebhookConfiguration":
                    self.kube.delete(MutatingWebhookConfiguration, name)
                else:
                    self.kube.delete(ValidatingWebhookConfiguration, name)
        self._installed.clear()
        proc, self._proc = self._proc, None
        terminate(proc)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        return f"----- {self.name} (last {lines} lines) -----\n" + _tail(self.log_path, lines)

    def client_config(self, path: str) -> dict[str, str]:
        """A webhook ``clientConfig`` calling this manager on loopback."""
        ca = base64.b64encode(self.plane.ca_path.read_bytes()).decode()
        return {"url": f"https://127.0.0.1:{self.webhook_port}{path}", "caBundle": ca}

    # -- internals ---------------------------------------------------------------------

    def _spawn(self) -> None:
        config = self.folder / "config.yaml"
        config.write_text(yaml.safe_dump(self.configuration()))
        args = [
            str(self.binary),
            f"--config={config}",
            f"--kubeconfig={self.plane.kubeconfig_path}",
        ]
        parent = os.getpid()
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                env={**os.environ, **self.environment()},
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
        docs = webhook_configurations(self.webhook_dir())
        for doc in docs:
            doc["metadata"] = {"name": self.webhook_name(doc["metadata"]["name"])}
            for hook in doc["webhooks"]:
                hook["clientConfig"] = self.client_config(hook["clientConfig"]["service"]["path"])
        apply_documents(self.kube, docs)
        self._installed = [(doc["kind"], doc["metadata"]["name"]) for doc in docs]

    def wait_until(self, deadline: float, ready: Callable[[], bool], what: str) -> None:
        """Poll `ready` until the deadline; fail at once if the manager exits."""
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ControlPlaneError(
                    f"{self.name} exited with code {self._proc.returncode} during start-up\n"
                    + self.log_tail()
                )
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{self.name}: {what} not ready within {self.start_timeout:.0f} s\n" + self.log_tail()
        )


def serving_certificate(plane: ControlPlane, folder: Path) -> None:
    """``tls.crt`` and ``tls.key`` in `folder`: a serving certificate for 127.0.0.1 and
    localhost signed by the control plane's CA (the API server trusts it through the
    caBundle of the webhook configurations)."""
    if shutil.which("openssl") is None:
        raise ControlPlaneUnavailable("a webhook certificate needs the openssl command")
    folder.mkdir(parents=True, exist_ok=True)
    key, cert = folder / "tls.key", folder / "tls.crt"
    csr, ext = folder / "serving.csr", folder / "serving.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    for args in (
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
         "-subj", "/CN=webhook-on-loopback"],
        ["x509", "-req", "-in", str(csr), "-CA", str(plane.ca_path),
         "-CAkey", str(plane.ca_key_path), "-CAcreateserial", "-days", "2",
         "-extfile", str(ext), "-out", str(cert)],
    ):  # fmt: skip
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)


def kustomization_resources(folder: Path) -> list[dict[str, Any]]:
    """The documents a kustomization's ``resources`` name, folders followed into their
    own kustomization, in order (no patches, prefixes or generators: the folders
    this is used on have none that change the objects)."""
    kustomization = fast_yaml.load((folder / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in kustomization.get("resources") or []:
        path = folder / resource
        if path.is_dir():
            docs.extend(kustomization_resources(path))
        else:
            docs.extend(doc for doc in fast_yaml.load_all(path.read_text()) if doc)
    return docs


def webhook_configurations(folder: Path) -> list[dict[str, Any]]:
    """The webhook configurations of a kustomization folder with its JSON patches
    (RFC 6902 ``add``/``replace``, the kind upstream's webhook folders use) applied
    to the documents their ``target`` names."""
    kustomization = fast_yaml.load((folder / "kustomization.yaml").read_text())
    docs = [
        copy.deepcopy(doc)
        for doc in kustomization_resources(folder)
        if doc.get("kind") in _WEBHOOK_KINDS
    ]
    for patch in kustomization.get("patches") or []:
        ops = fast_yaml.load((folder / patch["path"]).read_text())
        target = patch.get("target") or {}
        for doc in docs:
            if doc["kind"] == target.get("kind") and target.get("name") in (
                None,
                doc["metadata"]["name"],
            ):
                apply_json_patch(doc, ops)
    return docs


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """RFC 6902 ``add`` and ``replace`` on `doc`, in place; any other operation is an
    error, so that an upgrade whose manifests need more fails loudly."""
    for op in ops:
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"unsupported JSON patch operation {op['op']!r}")
        keys = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        parent: Any = doc
        for key in keys[:-1]:
            parent = parent[int(key)] if isinstance(parent, list) else parent[key]
        last, value = keys[-1], copy.deepcopy(op["value"])
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(index, value)
            else:
                parent[index] = value
        elif op["op"] == "replace" and last not in parent:
            raise KeyError(f"JSON patch replaces {op['path']}, which does not exist")
        else:
            parent[last] = value


def install_crds(kube: Client, crds: list[dict[str, Any]], timeout: float = 30.0) -> None:
    """Apply the CRDs and wait until each is Established."""
    apply_documents(kube, crds)
    deadline = time.monotonic() + timeout
    for crd in crds:
        name = crd["metadata"]["name"]
        while not _established(kube.get(CustomResourceDefinition, name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established within {timeout:.0f} s")
            time.sleep(0.1)


def _established(crd: CustomResourceDefinition) -> bool:
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
