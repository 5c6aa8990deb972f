"""Deleting pods and services when a job finishes (by cleanPodPolicy) or is suspended."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from tfjob.api import constants as c
from tfjob.api.timestamps import parse_rfc3339
from tfjob.core import conditions
from tfjob.core import pods as podlib
from tfjob.core.plan import Action, DeletePod, DeleteService

if TYPE_CHECKING:
    from tfjob.core.pass_state import Pass

#: (better) How long after a job's success cleanPodPolicy Running lets running replicas
#: end by themselves before deleting them. The replica that decides success (the
#: chief, worker 0) is often seconds ahead of peers that are finishing the same last
#: step; deleted at once, they lose their logs (docs/decisions/0026).
FINISHING_GRACE_SECONDS = 5


def cleanup_actions(state: Pass) -> list[Action]:
    """cleanPodPolicy for a finished job: All, Running (Running or Pending) or None.

    A deleted pod takes its same-name service with it; services are never deleted on
    their own here (upstream), and pods already terminating are skipped. Under Running,
    a succeeded job's running pods get FINISHING_GRACE_SECONDS from completionTime to
    end by themselves (kept, with their logs); those still running then are deleted.
    """
    policy = state.job.spec.run_policy.clean_pod_policy
    if policy == "None":
        return []
    if policy != "Running":
        return _delete_pods(state, None)
    completed = state.status.completion_time
    if conditions.is_true(state.status, c.SUCCEEDED) and completed is not None:
        grace_ends = parse_rfc3339(completed) + timedelta(seconds=FINISHING_GRACE_SECONDS)
        if state.now < grace_ends:
            if any(p.status.phase == "Running" for p in state.pods):
                state.requeue_at(grace_ends)
            return _delete_pods(state, ("Pending",))
    return _delete_pods(state, ("Running", "Pending"))


def suspend_actions(state: Pass) -> list[Action]:
    """A suspended job keeps nothing, whatever cleanPodPolicy says."""
    actions = _delete_pods(state, None)
    deleted = {a.name for a in actions if isinstance(a, DeleteService)}
    actions += [
        DeleteService(replica_type=state.replica_type_of(s.metadata.labels), name=s.metadata.name)
        for s in state.services
        if s.metadata.name not in deleted and s.metadata.deletion_timestamp is None
    ]
    return actions


def _delete_pods(state: Pass, phases: tuple[str, ...] | None) -> list[Action]:
    already = {a.name for a in state.actions if isinstance(a, DeletePod)}
    services = {s.metadata.name for s in state.services}
    actions: list[Action] = []
    for pod in state.pods:
        name = pod.metadata.name
        if podlib.is_terminating(pod) or name in already:
            continue
        if phases is not None and pod.status.phase not in phases:
            continue
        rtype = state.replica_type_of(pod.metadata.labels)
        actions.append(DeletePod(replica_type=rtype, name=name, uid=pod.metadata.uid))
        if name in services:
            actions.append(DeleteService(replica_type=rtype, name=name))
    return actions
