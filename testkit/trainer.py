"""Kubeflow Trainer's real controller manager beside the test cluster: the reference
operator for TrainJob.

``TrainerManager`` runs ``trainer-controller-manager`` v2.3.0 (built by
tools/envtest/build.sh, with the module's CRDs, shipped runtimes and webhook manifests
in ``trainer-<v>/config/``) against the session's control plane. It needs JobSet's CRD
(testkit/jobset.py) before it starts: it owns JobSets.

How it runs here (see testkit/manager_process.py for the webhooks on loopback):

- ``certManagement.enable: false``. With it on, Trainer starts no controller until its
  certificate rotator has written Secret ``kubeflow-trainer-webhook-cert`` (namespace
  ``kubeflow-system``) and injected its CA into the webhook configurations
  ``validator.trainer.kubeflow.org`` and ``defaulter.trainer.kubeflow.org``, and the
  certificate it makes is for the Service name, which the API server cannot reach
  here. Off, its controllers start at once and it serves whatever pair is in its
  webhook server's folder;
- that folder is not configurable in Trainer's configuration: controller-runtime's
  default, ``$TMPDIR/k8s-webhook-server/serving-certs``. ``TMPDIR`` is set to the
  test's folder, so our certificate for 127.0.0.1 sits there and nothing is written
  to the machine's /tmp;
- webhooks and health probes on 127.0.0.1, metrics off (``bindAddress: "0"``, secure
  serving off), no leader election; the controllers' concurrency as upstream's
  release configuration sets it;
- ready when /readyz answers and ``trainjob_controller`` logs "Starting workers";
  then its webhook configurations are installed, and the runtimes it ships
  (torch-distributed, deepspeed-distributed, ...) are applied through them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from testkit.controlplane import ControlPlane
from testkit.manager_process import LoopbackManager, install_crds, kustomization_resources

API = "/apis/trainer.kubeflow.org/v1alpha1"
#: The runtime a TrainJob names when it names no kind.
DEFAULT_RUNTIME_KIND = "ClusterTrainingRuntime"
FIELD_MANAGER = "tfjob-tests"


class TrainerManager(LoopbackManager):
    """Kubeflow Trainer's controller manager with its webhooks on loopback."""

    name: ClassVar[str] = "trainer"

    @property
    def tmpdir(self) -> Path:
        return self.folder / "tmp"

    @property
    def cert_dir(self) -> Path:
        """controller-runtime's default webhook certificate folder under ``TMPDIR``."""
        return self.tmpdir / "k8s-webhook-server" / "serving-certs"

    def configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0", "secureServing": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
            # As upstream's release configuration (the default is 1 each).
            "controller": {
                "groupKindConcurrency": {
                    "TrainJob.trainer.kubeflow.org": 5,
                    "TrainingRuntime.trainer.kubeflow.org": 1,
                    "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
                }
            },
        }

    def environment(self) -> dict[str, str]:
        return {"TMPDIR": str(self.tmpdir)}

    def crds(self) -> list[dict[str, Any]]:
        return kustomization_resources(self.config_dir / "crds")

    def webhook_dir(self) -> Path:
        return self.config_dir / "webhook"

    def started(self) -> bool:
        """The TrainJob controller's workers run (its start-up log line)."""
        if not self.log_path.is_file():
            return False
        return any(
            "Starting workers" in line and "trainjob_controller" in line
            for line in self.log_path.read_text(errors="replace").splitlines()
        )

    def webhooks_answer(self) -> bool:
        """Trainer's validator refuses (dry run) a TrainJob whose runtime does not
        exist; without the webhook the API server would accept it, and a webhook it
        cannot call fails with "failed calling webhook" instead."""
        status, body = self.plane.request(
            "POST",
            f"{API}/namespaces/default/trainjobs?dryRun=All",
            body=_probe_trainjob("trainer-webhook-probe-missing"),
        )
        message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
        return status >= 400 and (
            'admission webhook "validator.trainjob.trainer.kubeflow.org" denied' in message
        )

    def stop(self) -> None:
        """Stop it, then put tfjob's Trainer CRDs (manifests/base) back in place of
        Trainer's own: the session's other tests expect tfjob's (with its validation
        rules), and a later `kubectl apply --server-side` of the base (the README's)
        would conflict with the fields Trainer's left under the tests' field manager."""
        super().stop()
        from testkit import trainjob_api  # it imports this module

        install_crds(self.kube, trainjob_api.crds())

    def populate(self, deadline: float) -> None:
        """The runtimes Trainer ships, through its validator; then wait until its
        defaulter stamps a runtime patch (the mutating webhook answers too)."""
        for runtime in self.shipped_runtimes():
            apply_object(self.plane, runtime)
        self.wait_until(deadline, self._defaulter_answers, "its defaulting webhook")

    def shipped_runtimes(self) -> list[dict[str, Any]]:
        """The ClusterTrainingRuntimes of ``manifests/base/runtimes`` (its kustomization)."""
        return kustomization_resources(self.config_dir / "runtimes")

    def runtime(self, name: str) -> dict[str, Any]:
        """One shipped runtime's manifest, by name."""
        for runtime in self.shipped_runtimes():
            if runtime["metadata"]["name"] == name:
                return runtime
        raise KeyError(f"Trainer ships no runtime named {name}")

    def _defaulter_answers(self) -> bool:
        status, body = self.plane.request(
            "POST",
            f"{API}/namespaces/default/trainjobs?dryRun=All",
            body=_probe_trainjob("torch-distributed"),
        )
        if status != 201:
            return False
        return all(patch.get("time") for patch in body["spec"]["runtimePatches"])


def apply_object(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply of one object of Trainer's API (cluster-scoped, or namespaced
    with its namespace set), as ``kubectl apply --server-side --force-conflicts``."""
    plural = {
        "ClusterTrainingRuntime": "clustertrainingruntimes",
        "TrainingRuntime": "trainingruntimes",
        "TrainJob": "trainjobs",
    }[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    path = f"{API}{scope}/{plural}/{obj['metadata']['name']}"
    status, body = plane.request(
        "PATCH",
        f"{path}?fieldManager={FIELD_MANAGER}&force=true&fieldValidation=Strict",
        body=obj,
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    if status not in (200, 201):
        raise AssertionError(f"apply {obj['kind']} {obj['metadata']['name']}: {status} {body}")
    applied: dict[str, Any] = body
    return applied


def _probe_trainjob(runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "trainer-webhook-probe"},
        "spec": {
            "runtimeRef": {"name": runtime},
            "runtimePatches": [{"manager": "tfjob.test/probe"}],
        },
    }
