"""JobSet's real controller manager beside the test cluster.

A TrainJob becomes a ``jobset.x-k8s.io/v1alpha2`` JobSet; ``JobSetManager`` runs
``sigs.k8s.io/jobset`` (built by tools/envtest/build.sh, with its CRD and webhook
manifests from the same module version in ``jobset-<v>/config/``) so that JobSet
makes its Jobs, its headless Service and its status as in a real cluster; the Job
controller of kube-controller-manager (testkit/cluster.py) then makes the pods and
kwok runs them.

Its webhooks run too (testkit/manager_process.py: served on 127.0.0.1, our own
certificate), because JobSet's behaviour depends on them: its defaulting webhook
gives every replicated Job ``completionMode: Indexed`` (the pods' completion index,
which Trainer's ``PET_NODE_RANK`` reads) and a pod ``restartPolicy`` of OnFailure
(without one the Job API refuses the Job), turns on DNS hostnames, and sets the
success and startup policies. Its pod webhooks apply only to pods labelled
``jobset.sigs.k8s.io/jobset-name`` (upstream's objectSelector), so the other tests'
pods never reach them.

Configuration: internal certificate management off, metrics off (``bindAddress:
"0"``), health probes and webhooks on 127.0.0.1, no leader election. The CRD is
installed as its ``bases/`` file: upstream's kustomization adds a conversion
webhook, but the CRD has a single version, so there is never anything to convert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from testkit import fast_yaml
from testkit.manager_process import LoopbackManager

API = "/apis/jobset.x-k8s.io/v1alpha2"
#: The label JobSet puts on its Jobs and pods, naming the JobSet.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: The label naming a pod's or Job's replicated Job.
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


class JobSetManager(LoopbackManager):
    """JobSet's controller manager with its webhooks on loopback."""

    name: ClassVar[str] = "jobset"

    def configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.cert_dir),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 100, "burst": 200},
        }

    def crds(self) -> list[dict[str, Any]]:
        bases = self.config_dir / "crd" / "bases"
        return [fast_yaml.load(path.read_text()) for path in sorted(bases.glob("*.yaml"))]

    def webhook_dir(self) -> Path:
        return self.config_dir / "webhook"

    def webhook_name(self, upstream: str) -> str:
        """Upstream's release kustomization prefixes every name with ``jobset-``."""
        return f"jobset-{upstream}"

    def webhooks_answer(self) -> bool:
        """A server-side dry run of a JobSet that names no completion mode comes back
        Indexed: the defaulting webhook answered (and the validating one, which fails
        closed, let it through)."""
        status, body = self.plane.request(
            "POST", f"{API}/namespaces/default/jobsets?dryRun=All", body=_probe_jobset()
        )
        if status != 201:
            return False
        job = body["spec"]["replicatedJobs"][0]["template"]["spec"]
        return bool(job.get("completionMode") == "Indexed")


def _probe_jobset() -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "probe", "image": "probe"}]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "jobset-probe"},
        "spec": {"replicatedJobs": [{"name": "probe", "template": {"spec": {"template": pod}}}]},
    }
