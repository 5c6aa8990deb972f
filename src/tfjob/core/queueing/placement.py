"""What an admitted Workload lets the job run, and how its pods must be placed.

Admitting a Workload, Kueue chooses a ResourceFlavor for each podSet's resources (a
kind of node: its nodeLabels and the taints its nodes carry) and, with partial
admission, how many pods; admission checks may add labels, annotations, a node
selector and tolerations of their own. The job's pods must then carry all of it, or
they would run outside the quota Kueue reserved for them. Read and merged here as
Kueue v0.19.0's job framework does when it starts a job (jobframework
getPodSetsInfoFromStatus, pkg/podset FromAssignment, FromUpdate, Merge).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from tfjob.api.errors import TemporaryError
from tfjob.core.queueing.names import (
    CLUSTER_QUEUE_LABEL,
    LOCAL_QUEUE_LABEL,
    POD_SET_LABEL,
    WORKLOAD_ANNOTATION,
)
from tfjob.core.queueing.workload import WorkloadError

_TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
_MULTIKUEUE_ORIGIN = "kueue.x-k8s.io/multikueue-origin"
_MULTIKUEUE_WORKER_POD = "kueue.x-k8s.io/multikueue-worker-workload-pod"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class FlavorNotFound(TemporaryError):
    """An admission names a ResourceFlavor not yet observed: try again later."""


class PodSetUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """What one admission check asks of one podSet's pods (status.admissionChecks[]
    .podSetUpdates[]): additions only."""

    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[dict[str, Any], ...] = ()


class PodSetAdmission(msgspec.Struct, frozen=True, kw_only=True):
    """One podSet as admitted: the flavor chosen per resource and the pods to run."""

    name: str
    flavors: dict[str, str]  # resource name -> ResourceFlavor name
    count: int  # assigned count, else the podSet's own
    # Topology-Aware Scheduling placed it (status...topologyAssignment): its pods wait
    # behind Kueue's scheduling gate until Kueue assigns each a domain.
    topology_assigned: bool = False
    # Its podSet asked no topology level (implicit TAS: unconstrained by default).
    topology_unrequested: bool = True


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """An admitted Workload, as the job's pods need it."""

    workload: str
    queue: str
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]
    # Each admission check's updates, in status order: (check name, update).
    updates: tuple[tuple[str, PodSetUpdate], ...] = ()
    # The Workload is MultiKueue's copy on a worker cluster.
    multikueue_worker: bool = False


class PodSetInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What goes into one podSet's pods on admission, and how many of them run."""

    name: str
    count: int
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[dict[str, Any], ...] = ()
    scheduling_gates: tuple[dict[str, Any], ...] = ()


def condition(workload: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The Workload's condition of this type, if any."""
    for found in (workload.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None


def is_true(workload: Mapping[str, Any], kind: str) -> bool:
    found = condition(workload, kind)
    return found is not None and found.get("status") == "True"


def admission(workload: Mapping[str, Any]) -> Admission | None:
    """The Workload's admission, None until it is admitted: Kueue starts a job on
    its Admitted condition alone (workload.IsAdmitted), which Kueue sets only with
    quota reserved and every admission check ready; status.admission holds what was
    reserved."""
    return reservation(workload) if is_true(workload, "Admitted") else None


def reservation(workload: Mapping[str, Any]) -> Admission | None:
    """What status.admission reserves, admitted yet or not (None: nothing)."""
    status = workload.get("status") or {}
    admitted = status.get("admission")
    if not admitted:
        return None
    spec_sets = (workload.get("spec") or {}).get("podSets") or []
    assignments = admitted.get("podSetAssignments") or []
    meta = workload.get("metadata") or {}
    return Admission(
        workload=str(meta.get("name", "")),
        queue=str((workload.get("spec") or {}).get("queueName", "")),
        cluster_queue=str(admitted.get("clusterQueue", "")),
        pod_sets=tuple(
            _assignment(a, spec_sets[i] if i < len(spec_sets) else {})
            for i, a in enumerate(assignments)
        ),
        updates=tuple(_updates(status)),
        multikueue_worker=_MULTIKUEUE_ORIGIN in (meta.get("labels") or {}),
    )


def _assignment(assigned: Mapping[str, Any], pod_set: Mapping[str, Any]) -> PodSetAdmission:
    """One assignment, beside the podSet at its place (Kueue pairs them by place)."""
    request = pod_set.get("topologyRequest") or {}
    count = assigned.get("count")
    return PodSetAdmission(
        name=str(assigned.get("name", "main")),
        flavors={str(k): str(v) for k, v in (assigned.get("flavors") or {}).items()},
        count=int(count if count is not None else pod_set.get("count", 1)),
        topology_assigned=assigned.get("topologyAssignment") is not None,
        topology_unrequested=not any(
            request.get(k) is not None for k in ("required", "preferred", "unconstrained")
        ),
    )


def _updates(status: Mapping[str, Any]) -> list[tuple[str, PodSetUpdate]]:
    """Each check's updates, the first one per podSet only: Kueue reads no other."""
    out = []
    for check in status.get("admissionChecks") or []:
        seen: set[str] = set()
        for update in check.get("podSetUpdates") or []:
            parsed = _update(update)
            if parsed.name not in seen:
                seen.add(parsed.name)
                out.append((str(check.get("name", "")), parsed))
    return out


def _update(update: Mapping[str, Any]) -> PodSetUpdate:
    return PodSetUpdate(
        name=str(update.get("name", "")),
        labels=dict(update.get("labels") or {}),
        annotations=dict(update.get("annotations") or {}),
        node_selector=dict(update.get("nodeSelector") or {}),
        tolerations=tuple(update.get("tolerations") or ()),
    )


def pod_set_info(
    admitted: Admission, flavors: Mapping[str, Mapping[str, Any]]
) -> dict[str, PodSetInfo]:
    """Per podSet name, what its pods get: each chosen flavor's spec.nodeLabels as
    node selector and its spec.tolerations (each flavor once); the labels naming
    the podSet, LocalQueue and ClusterQueue, and the Workload's name annotation;
    then each admission check's first update for that podSet, merged.

    `flavors`: the ResourceFlavors by name, as observed. Raises FlavorNotFound for a
    flavor not there (Kueue retries until it is), WorkloadError for an update
    conflicting with what is already set (it cannot be honoured)."""
    return {ps.name: _info(admitted, ps, flavors) for ps in admitted.pod_sets}


def _info(
    admitted: Admission, assigned: PodSetAdmission, flavors: Mapping[str, Mapping[str, Any]]
) -> PodSetInfo:
    selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    for name in dict.fromkeys(assigned.flavors[r] for r in sorted(assigned.flavors)):
        if name not in flavors:
            raise FlavorNotFound(f"ResourceFlavor {name!r} of podSet {assigned.name} not found")
        spec = flavors[name].get("spec") or {}
        selector.update(spec.get("nodeLabels") or {})
        tolerations.extend(spec.get("tolerations") or [])
    info = PodSetInfo(
        name=assigned.name,
        count=assigned.count,
        labels=_pod_labels(admitted, assigned.name),
        annotations=_pod_annotations(admitted, assigned),
        node_selector=selector,
        tolerations=tuple(tolerations),
        scheduling_gates=({"name": _TOPOLOGY_GATE},) if assigned.topology_assigned else (),
    )
    for check, update in admitted.updates:
        if update.name == assigned.name:
            info = _merged(info, update, f"admission check {check!r}")
    return info


def _pod_labels(admitted: Admission, pod_set: str) -> dict[str, str]:
    labels = {POD_SET_LABEL: pod_set}
    if admitted.multikueue_worker:
        labels[_MULTIKUEUE_WORKER_POD] = "true"
    labels[LOCAL_QUEUE_LABEL] = admitted.queue
    cq = admitted.cluster_queue
    if len(cq) <= 63 and _DNS_LABEL.fullmatch(cq):
        labels[CLUSTER_QUEUE_LABEL] = cq
    return labels


def _pod_annotations(admitted: Admission, assigned: PodSetAdmission) -> dict[str, str]:
    notes = {}
    if assigned.topology_assigned and assigned.topology_unrequested:
        notes[_UNCONSTRAINED] = "true"
    notes[WORKLOAD_ANNOTATION] = admitted.workload
    return notes


def _merged(info: PodSetInfo, update: PodSetUpdate, source: str) -> PodSetInfo:
    """info with the update's additions; a key both set to different values is a
    conflict (pkg/podset PodSetInfo.Merge): two checks cannot both decide it."""
    fields = ("labels", "annotations", "node_selector")
    for field in fields:
        _check_conflict(getattr(info, field), getattr(update, field), field, source)
    return msgspec.structs.replace(
        info,
        labels={**info.labels, **update.labels},
        annotations={**info.annotations, **update.annotations},
        node_selector={**info.node_selector, **update.node_selector},
        tolerations=_with_tolerations(info.tolerations, update.tolerations),
    )


def _check_conflict(
    current: Mapping[str, str], added: Mapping[str, str], field: str, source: str
) -> None:
    for key, value in current.items():
        if key in added and added[key] != value:
            wire = "nodeSelector" if field == "node_selector" else field
            raise WorkloadError(
                f"{source}: {wire} key {key!r} is {value!r} and cannot also be {added[key]!r}"
            )


def _with_tolerations(
    current: tuple[dict[str, Any], ...], added: tuple[dict[str, Any], ...]
) -> tuple[dict[str, Any], ...]:
    out = list(current)
    for toleration in added:
        if not any(same_toleration(t, toleration) for t in out):
            out.append(toleration)
    return tuple(out)


def same_toleration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two tolerations are one (key, operator, value, effect; an unset
    operator is Equal; tolerationSeconds is not compared), as Kubernetes matches
    them."""

    def key(t: Mapping[str, Any]) -> tuple[str, str, str, str]:
        op = t.get("operator") or "Equal"
        return (t.get("key") or "", op, t.get("value") or "", t.get("effect") or "")

    return key(a) == key(b)


def inject(template: Mapping[str, Any], info: PodSetInfo) -> dict[str, Any]:
    """A copy of a replica's pod template with the admission's labels, annotations,
    node selector, tolerations and scheduling gates merged in (pkg/podset Merge).
    Raises WorkloadError when the template already sets one of those labels,
    annotations or node selector keys to another value: the pods could not be
    both, so the job cannot run as admitted."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    spec = out.setdefault("spec", {})
    source = f"podSet {info.name}"
    for field, current in (
        ("labels", meta.get("labels") or {}),
        ("annotations", meta.get("annotations") or {}),
        ("node_selector", spec.get("nodeSelector") or {}),
    ):
        _check_conflict(current, getattr(info, field), field, source)
    _merge_map(meta, "labels", info.labels)
    _merge_map(meta, "annotations", info.annotations)
    _merge_map(spec, "nodeSelector", info.node_selector)
    tolerations = _with_tolerations(tuple(spec.get("tolerations") or ()), info.tolerations)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    gates = list(spec.get("schedulingGates") or [])
    gates += [g for g in info.scheduling_gates if g not in gates]
    if gates:
        spec["schedulingGates"] = gates
    return out


def _merge_map(parent: dict[str, Any], field: str, added: Mapping[str, str]) -> None:
    if added:
        parent[field] = {**(parent.get(field) or {}), **added}
