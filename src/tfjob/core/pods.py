"""Reading observed pods: which slot, what exit code, how to count."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tfjob.api import constants as c
from tfjob.api.names import replica_key
from tfjob.api.observed import ContainerStatus, Pod
from tfjob.api.types import ReplicaStatus


def is_retryable_exit_code(code: int) -> bool:
    """Upstream v1.5+: exit codes >= 128 (killed by a signal) are worth a retry."""
    return code >= 128


def restarts_pod(restart_policy: str, exit_code: int) -> bool:
    """Whether a Failed pod of this policy is deleted and recreated (OnFailure and
    Always always; ExitCode for a retryable exit code)."""
    if restart_policy in ("OnFailure", "Always"):
        return True
    return restart_policy == "ExitCode" and is_retryable_exit_code(exit_code)


def exit_code(pod: Pod, container: str) -> int:
    """The training container's exit code, or upstream's magic 0xbeef if it has none."""
    status = pod.container_status(container)
    if status is None or status.state.terminated is None:
        return c.EXIT_CODE_UNKNOWN
    return status.state.terminated.exit_code


def pods_of_type(pods: Iterable[Pod], replica_type: str) -> list[Pod]:
    key = replica_key(replica_type)
    return [p for p in pods if p.metadata.labels.get(c.LABEL_REPLICA_TYPE) == key]


def slots(pods: Sequence[Pod], replicas: int, labelled: bool = True) -> list[list[Pod]]:
    """Pods grouped by replica index; `max(highest index + 1, replicas)` slots.
    `labelled`: the type's pods carry the replica-index label; without it (MPIJob's
    Launcher, one pod) every pod is in slot 0."""
    indexed: list[tuple[int, Pod]] = []
    for pod in pods:
        raw = pod.metadata.labels.get(c.LABEL_REPLICA_INDEX, "") if labelled else "0"
        if raw.isdigit():
            indexed.append((int(raw), pod))
    size = max([replicas, *(i + 1 for i, _ in indexed)])
    grouped: list[list[Pod]] = [[] for _ in range(size)]
    for index, pod in indexed:
        grouped[index].append(pod)
    return grouped


def is_terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def count_pod(status: ReplicaStatus, pod: Pod, *, forgive_termination: bool) -> None:
    """Add one pod to its type's counts (active, succeeded, failed).

    A Running pod being deleted counts as failed upstream (v1.7+). With a restart
    policy that recreates pods, tfjob counts it as neither: it is about to be
    replaced, and an eviction or preemption must not fail the job (#1560, #2124).
    """
    phase = pod.status.phase
    if phase == "Running" and is_terminating(pod):
        if not forgive_termination:
            status.failed += 1
    elif phase == "Running":
        status.active += 1
    elif phase == "Succeeded":
        status.succeeded += 1
    elif phase == "Failed":
        status.failed += 1


#: The reason the kubelet gives a container it lost while it ran (its pod evicted or
#: deleted under it): it moves the container to `lastState` as terminated with this
#: reason and exit code 137, sets it waiting, and adds one to `restartCount`, though
#: nothing restarted. Seen from an evicted pod of kubelet v1.36 (tests/node/test_faults.py).
LOST_CONTAINER = "ContainerStatusUnknown"


def restart_count(pod: Pod) -> int:
    """In-place restarts of all the pod's containers and init containers: the
    containers' `restartCount`, less the one the kubelet adds for a container it lost
    (LOST_CONTAINER), which would count an evicted pod's failure twice."""
    statuses = [*pod.status.container_statuses, *pod.status.init_container_statuses]
    return sum(s.restart_count - _lost(s) for s in statuses)


def _lost(status: ContainerStatus) -> int:
    last = status.last_state.terminated if status.last_state is not None else None
    lost = last is not None and last.reason == LOST_CONTAINER and status.state.waiting is not None
    return 1 if lost and status.restart_count > 0 else 0


def describe_exit(pod: Pod, container: str) -> str:
    """`j-worker-1 exited with code 137 (OOMKilled)`, for failure messages (#1749)."""
    status = pod.container_status(container)
    terminated = status.state.terminated if status is not None else None
    if terminated is None:
        reason = pod.status.reason or "no exit code"
        return f"{pod.metadata.name} failed ({reason})"
    reason = f" ({terminated.reason})" if terminated.reason else ""
    return f"{pod.metadata.name} exited with code {terminated.exit_code}{reason}"
