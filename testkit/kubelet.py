"""FakeKubelet: a test helper that plays the kubelet's part, and nothing else.

The test control plane is a real etcd and kube-apiserver but has no kubelet (and no
scheduler or controller-manager), so pods the operator creates stay ``Pending``
forever. This helper does what a kubelet would report: it writes pod phases and
container states through the real ``pods/status`` subresource, exactly the way a
kubelet does, so the API server validates every transition (a terminated container
cannot come back under ``restartPolicy: Never``, and so on). Everything else in these
tests - the API server, its validation and defaulting, RBAC, watches, the operator -
is real.

Containers: the operator only looks at the container named ``tensorflow`` (as
Kubeflow's does), so each method takes ``container="tensorflow"`` and gives that container the
requested state. Other containers in the pod get a plausible companion state (running
while the pod runs, terminated with exit code 0 once it ends).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

DEFAULT_CONTAINER = "tensorflow"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKubelet:
    """Report pod lifecycles to the API server the way a kubelet would.

    ``client`` is a lightkube **sync** Client (admin credentials: a real kubelet has
    its own node identity, which these tests do not model).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    # -- lifecycle transitions -----------------------------------------------------------

    def run(self, namespace: str, name: str) -> dict[str, Any]:
        """Pending -> Running: every container started and ready."""
        pod = self._get(namespace, name)
        now = _now()
        statuses = [
            self._container(c, pod, state={"running": {"startedAt": now}}, ready=True)
            for c in self._container_names(pod)
        ]
        return self._write(
            namespace,
            name,
            {
                "phase": "Running",
                "startTime": self._status(pod).get("startTime") or now,
                "conditions": self._conditions(ready=True),
                "containerStatuses": statuses,
            },
        )

    def succeed(
        self, namespace: str, name: str, exit_code: int = 0, *, container: str = DEFAULT_CONTAINER
    ) -> dict[str, Any]:
        """The pod ran to completion: phase Succeeded, containers terminated."""
        return self._terminate(
            namespace, name, "Succeeded", exit_code, "Completed", container=container
        )

    def fail(
        self,
        namespace: str,
        name: str,
        exit_code: int,
        reason: str = "Error",
        *,
        container: str = DEFAULT_CONTAINER,
        message: str | None = None,
    ) -> dict[str, Any]:
        """The pod failed: phase Failed and ``container`` terminated with ``exit_code``.

        Use ``reason="OOMKilled"`` with exit code 137 for an out-of-memory kill.
        """
        return self._terminate(
            namespace, name, "Failed", exit_code, reason, container=container, message=message
        )

    def evict(
        self, namespace: str, name: str, message: str = "The node was low on resource: memory."
    ) -> dict[str, Any]:
        """The kubelet evicted the pod: phase Failed with pod-level reason ``Evicted``.

        The containers were killed (exit code 137), and the ``DisruptionTarget``
        condition says why, as kubelets since 1.26 report it.
        """
        status = self._terminate(namespace, name, "Failed", 137, "Error", container=None)
        return self._write(
            namespace,
            name,
            {
                "reason": "Evicted",
                "message": message,
                "conditions": [
                    *status.get("conditions", []),
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "TerminationByKubelet",
                        "message": message,
                        "lastTransitionTime": _now(),
                    },
                ],
            },
        )

    def restart_in_place(
        self,
        namespace: str,
        name: str,
        exit_code: int = 1,
        *,
        container: str = DEFAULT_CONTAINER,
    ) -> dict[str, Any]:
        """The kubelet restarted ``container`` inside the same pod.

        That is what happens under a pod ``restartPolicy`` of OnFailure/Always: the
        pod keeps its name and phase Running, ``restartCount`` goes up by one, and
        ``lastState`` records how the previous run ended.
        """
        pod = self._get(namespace, name)
        now = _now()
        previous = {c.get("name"): c for c in self._status(pod).get("containerStatuses") or []}
        statuses = []
        for cname in self._container_names(pod):
            entry = self._container(cname, pod, state={"running": {"startedAt": now}}, ready=True)
            if cname == container:
                old = previous.get(cname, {})
                entry["restartCount"] = int(old.get("restartCount", 0)) + 1
                entry["lastState"] = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "startedAt": (old.get("state", {}).get("running") or {}).get("startedAt")
                        or now,
                        "finishedAt": now,
                    }
                }
            statuses.append(entry)
        return self._write(
            namespace,
            name,
            {
                "phase": "Running",
                "startTime": self._status(pod).get("startTime") or now,
                "conditions": self._conditions(ready=True),
                "containerStatuses": statuses,
            },
        )

    # -- conveniences for tests ----------------------------------------------------------

    def wait_for_pods(
        self,
        namespace: str,
        count: int,
        labels: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> list[str]:
        """Names of at least ``count`` pods matching ``labels``, polling until timeout.

        A kubelet learns about pods by watching; tests usually just need "the operator
        has created them by now".
        """
        deadline = time.monotonic() + timeout
        names: list[str] = []
        while time.monotonic() < deadline:
            names = sorted(
                p.metadata.name
                for p in self.client.list(Pod, namespace=namespace, labels=dict(labels or {}))
                if p.metadata is not None and p.metadata.name
            )
            if len(names) >= count:
                return names
            time.sleep(0.1)
        raise TimeoutError(
            f"expected {count} pods in {namespace} with {labels or {}}, saw {len(names)}: {names}"
        )

    # -- internals -----------------------------------------------------------------------

    def _terminate(
        self,
        namespace: str,
        name: str,
        phase: str,
        exit_code: int,
        reason: str,
        *,
        container: str | None,
        message: str | None = None,
    ) -> dict[str, Any]:
        pod = self._get(namespace, name)
        now = _now()
        previous = {c.get("name"): c for c in self._status(pod).get("containerStatuses") or []}
        statuses = []
        for cname in self._container_names(pod):
            mine = container is None or cname == container
            started = (previous.get(cname, {}).get("state", {}).get("running") or {}).get(
                "startedAt"
            ) or now
            terminated: dict[str, Any] = {
                "exitCode": exit_code if mine else 0,
                "reason": reason if mine else "Completed",
                "startedAt": started,
                "finishedAt": now,
            }
            if mine and message:
                terminated["message"] = message
            statuses.append(
                self._container(cname, pod, state={"terminated": terminated}, ready=False)
            )
        return self._write(
            namespace,
            name,
            {
                "phase": phase,
                "startTime": self._status(pod).get("startTime") or now,
                "conditions": self._conditions(ready=False),
                "containerStatuses": statuses,
            },
        )

    def _get(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.client.get(Pod, name, namespace=namespace)
        data: dict[str, Any] = pod.to_dict()
        return data

    @staticmethod
    def _status(pod: dict[str, Any]) -> dict[str, Any]:
        status: dict[str, Any] = pod.get("status") or {}
        return status

    @staticmethod
    def _container_names(pod: dict[str, Any]) -> list[str]:
        return [c["name"] for c in (pod.get("spec") or {}).get("containers", [])]

    @classmethod
    def _container(
        cls, name: str, pod: dict[str, Any], *, state: dict[str, Any], ready: bool
    ) -> dict[str, Any]:
        """One containerStatuses entry; the restart count the container reached stays."""
        image = next(
            (c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == name), ""
        )
        previous: dict[str, Any] = next(
            (c for c in cls._status(pod).get("containerStatuses") or [] if c.get("name") == name),
            {},
        )
        return {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": ready,
            "started": "running" in state,
            "restartCount": int(previous.get("restartCount", 0)),
            "state": state,
        }

    @staticmethod
    def _conditions(*, ready: bool) -> list[dict[str, Any]]:
        now = _now()
        value = "True" if ready else "False"
        return [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": value, "lastTransitionTime": now},
            {"type": "Ready", "status": value, "lastTransitionTime": now},
        ]

    def _write(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch ``status`` through pods/status, as the kubelet's status manager does.

        A merge patch replaces lists whole, so containerStatuses and conditions are
        always sent complete.
        """
        patched = self.client.patch(
            Pod.Status,
            name,
            {"status": status},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        result: dict[str, Any] = patched.to_dict().get("status") or {}
        return result
