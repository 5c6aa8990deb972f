"""An operator's Events yield to its creates and deletes, and are all written after.

Run in-process on the real API server. The test holds "a create in flight" open (as a
burst of other jobs would) while the operator creates one job's pods and services:
the job's Events wait, and once the creates end every one of them is written - after
every pod and service (etcd's resourceVersions give the order of storage)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from testkit.helpers import tfjob
from testkit.operators import replica
from tfjob.api.constants import CONTROLLER_NAME
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller.operator import Operator, OperatorOptions
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, SERVICES, jobs_of

TFJOBS = jobs_of(TENSORFLOW)


async def _items(client: KubeClient, resource: Any, namespace: str) -> list[dict[str, Any]]:
    return list(msgspec.json.decode(await client.list(resource, namespace))["items"])


async def _until_count(
    client: KubeClient, resource: Any, namespace: str, count: int, within: float = 20
) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while len(items := await _items(client, resource, namespace)) < count:
        assert loop.time() < deadline, f"{len(items)} of {count} {resource.plural}"
        await asyncio.sleep(0.05)
    return items


async def _operators_events(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    """Only the operator's: a kube-scheduler another test started on this API server
    writes FailedScheduling Events for these pods too."""
    events = await _items(client, EVENTS, namespace)
    return [e for e in events if e.get("reportingComponent") == CONTROLLER_NAME]


def _version(item: dict[str, Any]) -> int:
    return int(item["metadata"]["resourceVersion"])


async def test_an_operators_events_wait_for_creates_and_all_follow(
    client: KubeClient, namespace: str, crd_installed: Any
) -> None:
    options = OperatorOptions(namespace=namespace, metrics_port=-1, health_port=-1, workers=1)
    operator = Operator(options, client)
    stop = asyncio.Event()
    running = asyncio.create_task(operator.run(stop))
    try:
        with operator.writes.acting():  # other jobs' creates, all along
            await client.create(
                TFJOBS, namespace, tfjob("follow", namespace, {"Worker": replica(3)})
            )
            await _until_count(client, PODS, namespace, 3)
            await _until_count(client, SERVICES, namespace, 3)
            await asyncio.sleep(0.5)
            assert await _operators_events(client, namespace) == []  # they wait (bound: 5 s)
            assert operator.recorder.pending > 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while operator.recorder.pending:  # quiet: they go
            assert loop.time() < deadline
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        assert await asyncio.wait_for(running, 30) == 0
    events = await _operators_events(client, namespace)
    reasons = [e["reason"] for e in events]
    assert reasons.count("SuccessfulCreatePod") == 3
    assert reasons.count("SuccessfulCreateService") == 3
    recorded = operator.recorder.metrics.recorded._value.get()
    assert sum(int(e["count"]) for e in events) == recorded  # nothing dropped
    objects = [
        *await _items(client, PODS, namespace),
        *await _items(client, SERVICES, namespace),
    ]
    # No kubelet or controller changes them, so their version is their create's.
    assert min(_version(e) for e in events) > max(_version(o) for o in objects)
