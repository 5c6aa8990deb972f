"""The least any operator must do for race_bench's work: a floor to judge targets by.

Not an operator. It keeps no cache, handles no failure, reads no spec beyond what the
race submits, and waits for nothing it need not wait for. It does the race's required
writes, as soon as it may and as many at once as the API server takes:
- a new TFJob (watched): the pods and services the core renders for it, all at once;
- all of a job's pods Running: one status write with Created and Running;
- all of them Succeeded: one status write with Succeeded;
- with --events, also the Events tfjob records for that work (one per created
  object, one per exited pod, one TFJobSucceeded: ~13 a job), 4 at a time on their
  own budget, as tfjob's recorder writes them.
The same client (our KubeClient on http1.py) and limits (--kube-api-qps/--kube-api-burst)
as the operators. So its time is what the API server and the bench's kubelet need for
the work on this machine, and its CPU what our HTTP stack needs for the requests.

`race_bench.py --order floor` runs it as it runs the operators (it serves /readyz;
/metrics is empty).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.operator_bench import create_objects
from tfjob.core.settings import Settings
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller.server import Answer, _handler
from tfjob.runtimes.kubernetes.transport.client import KubeClient
from tfjob.runtimes.kubernetes.transport.resources import EVENTS, PODS, Resource, jobs_of, owned_by

TFJOBS = jobs_of(TENSORFLOW)
OWNED_SELECTOR = owned_by(TENSORFLOW)

JOB_LABEL = "training.kubeflow.org/job-name"
REPLICAS = 4  # the race's jobs: 4 workers each
EVENT_SENDERS = 4


class _Meta(msgspec.Struct):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""  # wire name
    labels: dict[str, str] = {}


class _Status(msgspec.Struct):
    phase: str = ""
    conditions: list[Any] = []


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _Status = msgspec.field(default_factory=_Status)


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # wire name


class _List(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(type_: str, reason: str) -> dict[str, str]:
    now = _now()
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": f"TFJob {reason}",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


class Floor:
    def __init__(self, client: KubeClient, namespace: str, events: bool) -> None:
        self.client = client
        self.events_client = client.with_own_budget()
        self.namespace = namespace
        self.with_events = events
        self.settings = Settings()
        self.uids: dict[str, str] = {}
        self.phases: dict[str, dict[str, str]] = {}  # job -> pod -> phase
        self.written: dict[str, set[str]] = {}  # job -> conditions written
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()
        self.ready = False

    async def run(self) -> None:
        watches = [
            self._watch(TFJOBS, "", self._job),
            self._watch(PODS, OWNED_SELECTOR, self._pod),
        ]
        senders = [self._send_events() for _ in range(EVENT_SENDERS)]
        await asyncio.gather(*watches, *senders)

    async def _watch(
        self, resource: Resource, selector: str, handle: Callable[[str, _Obj], None]
    ) -> None:
        raw = await self.client.list(resource, self.namespace, limit=1, label_selector=selector)
        version = msgspec.json.decode(raw, type=_List).metadata.resourceVersion
        self.ready = self.ready or resource is PODS
        while True:
            events = self.client.watch(
                resource, self.namespace, resource_version=version, label_selector=selector
            )
            async for line in events:
                event = msgspec.json.decode(line, type=_Event)
                obj = msgspec.json.decode(event.object, type=_Obj)
                version = obj.metadata.resourceVersion or version
                if event.type in ("ADDED", "MODIFIED"):
                    handle(event.type, obj)
                if event.type == "ADDED" and resource is TFJOBS:
                    self._spawn(self._create(bytes(event.object), obj.metadata))

    def _job(self, _type: str, obj: _Obj) -> None:
        self.uids[obj.metadata.name] = obj.metadata.uid

    def _pod(self, _type: str, obj: _Obj) -> None:
        job = obj.metadata.labels.get(JOB_LABEL, "")
        pods = self.phases.setdefault(job, {})
        before = pods.get(obj.metadata.name)
        pods[obj.metadata.name] = obj.status.phase
        if before != "Succeeded" and obj.status.phase == "Succeeded":
            self._event(job, "ExitedWithCode", f"Pod: {obj.metadata.name} exited with code 0")
        phases = list(pods.values())
        done = self.written.setdefault(job, set())
        if len(phases) < REPLICAS:
            return
        if "Succeeded" not in done and all(p == "Succeeded" for p in phases):
            done.add("Succeeded")
            conditions = [
                _condition("Created", "TFJobCreated"),
                _condition("Succeeded", "TFJobSucceeded"),
            ]
            self._spawn(self._status(job, conditions))
            self._event(
                job, "TFJobSucceeded", f"TFJob {self.namespace}/{job} successfully completed."
            )
        elif "Running" not in done and all(p in ("Running", "Succeeded") for p in phases):
            done.add("Running")
            conditions = [
                _condition("Created", "TFJobCreated"),
                _condition("Running", "TFJobRunning"),
            ]
            self._spawn(self._status(job, conditions))

    async def _create(self, raw: bytes, meta: _Meta) -> None:
        await create_objects(self.client, self.namespace, raw, self.settings)
        for i in range(REPLICAS):
            self._event(meta.name, "SuccessfulCreatePod", f"Created pod: {meta.name}-worker-{i}")
            self._event(
                meta.name, "SuccessfulCreateService", f"Created service: {meta.name}-worker-{i}"
            )

    async def _status(self, job: str, conditions: list[dict[str, str]]) -> None:
        patch = {"status": {"conditions": conditions, "replicaStatuses": {}}}
        await self.client.merge_patch(TFJOBS, self.namespace, job, patch, subresource="status")

    def _event(self, job: str, reason: str, message: str) -> None:
        if not self.with_events:
            return
        now = _now()
        self.outbox.put_nowait(
            {
                "metadata": {"generateName": f"{job}.", "namespace": self.namespace},
                "involvedObject": {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "TFJob",
                    "name": job,
                    "namespace": self.namespace,
                    "uid": self.uids.get(job, ""),
                },
                "reason": reason,
                "message": message,
                "type": "Normal",
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": "tfjob-controller"},
                "reportingComponent": "tfjob-controller",
            }
        )

    async def _send_events(self) -> None:
        while True:
            body = await self.outbox.get()
            await self.events_client.create(EVENTS, self.namespace, body)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"floor: {task.exception()!r}", flush=True)


async def serve(port: int, answer: Callable[[], bool]) -> asyncio.Server:
    """/readyz and /metrics (empty), on the operator's own little server."""

    def handle() -> Answer:
        return (200 if answer() else 503), "text/plain", b""

    routes = {"/readyz": handle, "/metrics": handle}
    return await asyncio.start_server(_handler(routes), "127.0.0.1", port, reuse_address=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--health-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--kube-api-qps", type=float, default=0.0)
    parser.add_argument("--kube-api-burst", type=int, default=0)
    parser.add_argument("--events", action="store_true")
    args = parser.parse_args()
    client = KubeClient.connect(args.kubeconfig, qps=args.kube_api_qps, burst=args.kube_api_burst)
    floor = Floor(client, args.namespace, args.events)
    runners = [
        await serve(args.health_port, lambda: floor.ready),
        await serve(args.metrics_port, lambda: True),
    ]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    work = asyncio.create_task(floor.run())
    work.add_done_callback(lambda _task: stop.set())  # it failed: say so, and stop
    await stop.wait()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work  # raises what stopped it, if it failed
    for runner in runners:
        runner.close()
        await runner.wait_closed()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
