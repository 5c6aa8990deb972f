"""A pod delete touches only the pod the plan saw, on the real API server.

The plan deletes a pod it read from the caches (a failed replica to restart, a
replica scaled away, a finished job's pods). By the time the delete arrives that pod
may be gone and another made under its fixed name: the operator's own replacement, a
restart racing a late cache. Deleting by name alone would take the replacement; the
delete carries the uid the plan saw as a precondition, so the API server refuses it
for any other pod, and the write path counts that as done (the pod it meant is gone).
"""

from __future__ import annotations

import json
from typing import Any

from testkit import builders
from tfjob.core.plan import DeletePod
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.cache.consistency import JobView
from tfjob.runtimes.kubernetes.controller.activity import ReconcileWrites
from tfjob.runtimes.kubernetes.controller.events import EventRecorder, ObjectRef
from tfjob.runtimes.kubernetes.controller.metrics import Metrics
from tfjob.runtimes.kubernetes.controller.writes import Writer
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.resources import PODS


def _pod(name: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "example.com/none:1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container]}}  # fmt: skip


async def _uid(client: KubeClient, namespace: str, name: str) -> str:
    return str(json.loads(await client.get(PODS, namespace, name))["metadata"]["uid"])


async def test_a_pod_delete_leaves_a_replacement_made_under_the_same_name(
    client: KubeClient, namespace: str
) -> None:
    seen = json.loads(await client.create(PODS, namespace, _pod("pg-worker-0")))
    await client.delete(PODS, namespace, "pg-worker-0")  # unbound: gone at once
    await client.create(PODS, namespace, _pod("pg-worker-0"))
    replacement = await _uid(client, namespace, "pg-worker-0")

    metrics = Metrics()
    writer = Writer(TENSORFLOW, client, EventRecorder(client), metrics, ReconcileWrites())
    job = builders.job("pg", namespace, Worker=builders.replica(1))
    view = JobView(f"{namespace}/pg", job, [], [])
    ref = ObjectRef(namespace=namespace, name="pg", uid=builders.UID, kind=TENSORFLOW.kind,
                    api_version=TENSORFLOW.api_version, reporter=TENSORFLOW.controller_name)  # fmt: skip
    late = DeletePod(replica_type="Worker", name="pg-worker-0", uid=seen["metadata"]["uid"])
    assert await writer.apply(view, ref, writer.write_of(late, ref)) is None  # done: it is gone
    assert await _uid(client, namespace, "pg-worker-0") == replacement  # and this one stays

    current = DeletePod(replica_type="Worker", name="pg-worker-0", uid=replacement)
    assert await writer.apply(view, ref, writer.write_of(current, ref)) is None
    assert await client.delete(PODS, namespace, "pg-worker-0") is None  # deleted: 404
