"""Kubeflow's training-operator v1.9.4 (the real one, built by tools/envtest/build.sh),
started against the test control plane for the swap and parity tests.

What it needs to start outside a cluster: its admission webhook's certificate. Its
cert rotator fills the Secret `kubeflow/training-operator-webhook-cert` (which must
exist) and then waits until the same certificate is on disk in
/tmp/k8s-webhook-server/serving-certs, where a pod would mount that Secret. Here we
play that volume: copy the Secret's keys into the folder. The folder is a fixed path,
so where `unshare` can give the process a private mount namespace it gets a private
folder bound there (two runs on one machine cannot clash); elsewhere the shared path
is used. No ValidatingWebhookConfiguration is installed: the operator only logs that
it has none to update, and TFJobs are then not checked by its webhook (tfjob has no
webhook either; the CRD's schema checks both).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Secret

from testkit.controlplane import find_assets
from testkit.helpers import free_port, wait_for
from testkit.operators import RunningOperator

NAMESPACE = "kubeflow"  # its own namespace when it has no service-account file
SECRET = "training-operator-webhook-cert"
CERT_DIR = Path("/tmp/k8s-webhook-server")
VERSION = "v1.9.4"


def binary() -> Path:
    return find_assets(build=False).tool("training-operator")


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def _ensure_secret(kube: Client) -> None:
    with contextlib.suppress(ApiError):
        kube.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
    with contextlib.suppress(ApiError):
        kube.create(Secret(metadata=ObjectMeta(name=SECRET, namespace=NAMESPACE)))


@dataclass
class Kubeflow:
    """Starts Kubeflow's operator for one namespace; `running` for the test to stop."""

    kube: Client
    kubeconfig: Path
    namespace: str
    folder: Path
    schemes: tuple[str, ...] = ("tfjob",)  # its --enable-scheme values

    def start(self) -> RunningOperator:
        _ensure_secret(self.kube)
        health, metrics = free_port(), free_port()
        args = [
            str(binary()),
            f"--kubeconfig={self.kubeconfig}",
            *(f"--enable-scheme={scheme}" for scheme in self.schemes),
            f"--namespace={self.namespace}",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            f"--webhook-server-port={free_port()}",
            "--zap-devel=false",
        ]
        private = _can_unshare()
        certs = (self.folder / "webhook") if private else CERT_DIR
        serving = certs / "serving-certs"
        serving.mkdir(parents=True, exist_ok=True)
        if private:
            CERT_DIR.mkdir(parents=True, exist_ok=True)  # the mount point
            args = [
                "unshare", "--mount", "--propagation", "private", "sh", "-c",
                f'mount --bind "{certs}" "{CERT_DIR}" && exec "$@"', "sh", *args,
            ]  # fmt: skip
        log_path = self.folder / "kubeflow-operator.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        running = RunningOperator(process, log_path, health, metrics, args)
        self._mount_certificate(running, serving)
        running.wait_ready()
        return running

    def _mount_certificate(self, running: RunningOperator, serving: Path) -> None:
        """Copy the Secret the rotator filled into the folder, as a secret volume would."""

        def filled() -> dict[str, str] | None:
            if running.process.poll() is not None:
                pytest.fail(f"Kubeflow's operator exited:\n{running.log_tail()}")
            data = self.kube.get(Secret, SECRET, namespace=NAMESPACE).data or {}
            return data if "tls.crt" in data and "tls.key" in data else None

        data = wait_for(filled, 60, message="the webhook certificate in its Secret")
        for key, value in data.items():
            (serving / key).write_bytes(base64.b64decode(value))


def stop(running: RunningOperator) -> int:
    """SIGTERM and wait; the exit code.

    v1.9.4 stops its controllers cleanly on SIGTERM and then panics ("close of closed
    channel": main.go closes the certificates-ready channel its cert rotator already
    closed), so it exits 2 after a clean stop; callers check that it stopped.
    """
    if running.process.poll() is None:
        running.process.send_signal(signal.SIGTERM)
        try:
            running.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            running.process.kill()
            running.process.wait()
    return running.process.returncode
