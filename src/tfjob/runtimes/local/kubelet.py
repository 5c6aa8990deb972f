"""LocalKubelet: runs pod manifests as local process groups and reports them as Pods.

It plays the part a kubelet plays on a node, for every pod of a job: start the
containers of a pod the core asked for, restart them in place as the pod's
`restartPolicy` says, report their state, and stop them gracefully when the core (or
the end of the run) deletes the pod. It decides nothing about the job.

It is event-driven: `on_change` is called when a pod's reported state changes (a
process started, exited, is backing off, or a pod is gone), never on a timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tfjob.api import constants as c
from tfjob.api.observed import Pod
from tfjob.core.progress import replica_label
from tfjob.runtimes.local import launch
from tfjob.runtimes.local.container import LocalContainer
from tfjob.runtimes.local.output import ContainerLog
from tfjob.runtimes.local.pod import LocalPod
from tfjob.runtimes.local.ports import port_of
from tfjob.runtimes.local.watchdog import Watchdog

DEFAULT_GRACE_PERIOD = 5.0
# Called with a replica's label (e.g. "worker-1") and each line of its output.
OnReplicaLine = Callable[[str, str], None]


class LocalKubelet:
    """Every local pod of one run, by name."""

    def __init__(
        self,
        *,
        base_dir: Path,
        log_dir: Path,
        addresses: dict[str, list[str]] | None = None,
        grace_period: float | None = None,
        on_line: OnReplicaLine = lambda _replica, _line: None,
        on_change: Callable[[], None] = lambda: None,
        watchdog: Watchdog | None = None,
        training_container: str = c.DEFAULT_CONTAINER_NAME,
        not_inherited: tuple[str, ...] = (),
    ) -> None:
        """`grace_period`, when set, overrides each pod's terminationGracePeriodSeconds
        (which otherwise applies, defaulting to DEFAULT_GRACE_PERIOD).
        `training_container`: the kind's (`tensorflow`, `pytorch`), whose output is
        prefixed with the replica alone and logged to `<pod>.log`. `not_inherited`:
        the kind's variables, which no replica takes from tfjob's environment."""
        self._training = training_container
        self._not_inherited = not_inherited
        self._base_dir = base_dir
        self._log_dir = log_dir
        self._addresses = addresses or {}
        self._grace_period = grace_period
        self._on_line = on_line
        self._on_change = on_change
        self._watchdog = watchdog
        self._pods: dict[str, LocalPod] = {}
        self._deleting: dict[str, asyncio.Task[None]] = {}

    def pods(self) -> list[Pod]:
        """Every pod that exists (terminating ones included), as observed Pods."""
        return [pod.observed() for pod in self._pods.values()]

    def local_pods(self) -> list[LocalPod]:
        return list(self._pods.values())

    def create_pod(self, manifest: Mapping[str, Any]) -> bool:
        """Start a pod; False if a pod of that name exists (as AlreadyExists would)."""
        name = str(manifest["metadata"]["name"])
        if name in self._pods:
            return False
        pod = self._build(manifest)
        self._pods[name] = pod
        pod.start()
        self._on_change()
        return True

    def delete_pod(self, name: str) -> bool:
        """Begin deleting a pod; False if there is none or it is already terminating."""
        pod = self._pods.get(name)
        if pod is None or name in self._deleting:
            return False
        pod.terminate()
        self._deleting[name] = asyncio.create_task(self._delete(pod), name=f"delete {name}")
        self._on_change()
        return True

    async def shutdown(self) -> None:
        """Delete every pod and wait until all their processes are gone."""
        for name in list(self._pods):
            self.delete_pod(name)
        await asyncio.gather(*self._deleting.values())

    def kill_all(self) -> None:
        """SIGKILL every process now (a second Ctrl-C: no more grace)."""
        for pod in self._pods.values():
            pod.kill()

    async def _delete(self, pod: LocalPod) -> None:
        try:
            await pod.stopped(self._grace_for(pod))
        finally:
            for container in pod.containers:
                container.close_log()
            del self._pods[pod.name]
            del self._deleting[pod.name]
            self._on_change()

    def _grace_for(self, pod: LocalPod) -> float:
        if self._grace_period is not None:
            return self._grace_period
        value = pod.manifest.get("spec", {}).get("terminationGracePeriodSeconds")
        return float(value) if value is not None else DEFAULT_GRACE_PERIOD

    def _build(self, manifest: Mapping[str, Any]) -> LocalPod:
        metadata = manifest["metadata"]
        spec = manifest.get("spec", {})
        replica = replica_label(metadata)
        extra_env = self._extra_env(metadata)
        containers = []
        for container in spec.get("containers", []):
            name = str(container.get("name", ""))
            shown = replica_label(metadata, name, self._training)
            log = self._open_log(metadata["name"], name, shown)
            containers.append(
                LocalContainer(
                    name,
                    _resolve(container, metadata, extra_env, self._base_dir, self._not_inherited),
                    str(spec.get("restartPolicy", "Always")),
                    log,
                    self._watchdog,
                    self._on_change,
                )
            )
        return LocalPod(manifest, replica, containers)

    def _open_log(self, pod_name: str, container: str, shown: str) -> ContainerLog:
        suffix = "" if container == self._training else f".{container}"
        log = ContainerLog(
            self._log_dir / f"{pod_name}{suffix}.log",
            lambda line: self._on_line(shown, line),
        )
        log.marker(f"pod {pod_name} created, container {container}")
        return log

    def _extra_env(self, metadata: Mapping[str, Any]) -> dict[str, str]:
        labels = metadata.get("labels") or {}
        key = str(labels.get(c.LABEL_REPLICA_TYPE, ""))
        index = str(labels.get(c.LABEL_REPLICA_INDEX, ""))
        env = {"TFJOB_POD_NAME": str(metadata.get("name", "")), "PYTHONUNBUFFERED": "1"}
        if key:  # a v1 job's replica (a TrainJob's pods have no replica type)
            env = {"TFJOB_REPLICA_TYPE": key, "TFJOB_REPLICA_INDEX": index, **env}
        port = port_of(self._addresses, key, int(index)) if index.isdigit() else None
        if port is not None:
            env["TFJOB_PORT"] = str(port)
        return env


def _resolve(
    container: Mapping[str, Any],
    metadata: Mapping[str, Any],
    extra_env: Mapping[str, str],
    base_dir: Path,
    not_inherited: tuple[str, ...],
) -> launch.Launch | launch.LaunchError:
    """The launch, or the reason it cannot start (reported as the container's exit)."""
    try:
        return launch.resolve(container, metadata, extra_env, base_dir, not_inherited)
    except launch.LaunchError as error:
        return error
