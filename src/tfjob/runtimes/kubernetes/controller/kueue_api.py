"""`--kueue-integration=external` on Kubernetes: Kueue's Workload API must be served.

tfjob makes and keeps its queued jobs' Workloads (core/queued.py) only if Kueue
v0.19+ (kueue.x-k8s.io/v1beta2) is installed; without it every queued job would wait
for a Workload that cannot be made. So, as with gang scheduling's group API
(gang_groups.py), the operator checks at start-up and exits naming the fix.
"""

from __future__ import annotations

from tfjob.api.errors import PermanentError
from tfjob.runtimes.kubernetes.cache.kueue import WORKLOADS
from tfjob.runtimes.kubernetes.transport.client import ApiError, KubeClient

FIX = (
    "install Kueue v0.19+ and list the kinds tfjob serves under its configuration's "
    "integrations.externalFrameworks (e.g. TFJob.v1.kubeflow.org), not under "
    "integrations.frameworks"
)


class KueueUnavailable(PermanentError):
    """Kueue's Workload API is not served by this cluster."""


async def check_served(client: KubeClient, namespace: str | None) -> None:
    """Raise KueueUnavailable naming the missing API and the fix."""
    try:
        await client.list(WORKLOADS, namespace, limit=1)
    except ApiError as error:
        if error.not_found:
            raise KueueUnavailable(
                f"--kueue-integration=external needs Workloads ({WORKLOADS.group}/"
                f"{WORKLOADS.version}), which this cluster does not serve: {FIX}"
            ) from error
        raise
