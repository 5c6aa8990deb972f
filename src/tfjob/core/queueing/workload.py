"""The Workload a queued job needs: what Kueue admits, as its job framework builds it.

A Workload is the job as Kueue sees it: one podSet per replica type (how many pods,
from which template), the LocalQueue, the priority. Kueue's scheduler reserves quota
for it and, once every admission check is ready, admits it; the job runs only then.
Built here as Kueue v0.19.0 builds a kubeflow job's (jobframework ConstructWorkload
and NewWorkload, kubeflowjob PodSets), so a Workload tfjob makes and one Kueue's
built-in integration makes are the same object, with one addition: an elastic job's
Workers may be admitted in part (`minCount`), which Kueue's integration never asks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterator
from typing import Any, Final, NamedTuple

from tfjob.api import constants as c
from tfjob.api.errors import PermanentError
from tfjob.api.owners import owner_reference
from tfjob.api.types import Job, ReplicaSpec
from tfjob.core.queueing.names import (
    API_VERSION,
    FINALIZER,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    PROV_REQ_PREFIX,
    is_label_value,
    max_execution_seconds,
    queue_name,
    workload_name,
)
from tfjob.frameworks.registry import framework_of

#: `Priority.source` of a WorkloadPriorityClass and of a pod PriorityClass (the
#: names v1beta1 Workloads carry in priorityClassSource).
WORKLOAD_PRIORITY_CLASS: Final = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS: Final = "scheduling.k8s.io/priorityclass"
#: v1beta2's priorityClassRef (group, kind) for each source.
_REF_OF_SOURCE: Final = {
    WORKLOAD_PRIORITY_CLASS: ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    POD_PRIORITY_CLASS: ("scheduling.k8s.io", "PriorityClass"),
}

# The pod template annotations a podSet's topologyRequest is read from.
_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
_GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# What Go's strconv.ParseBool and ParseInt(s, 10, 32) accept.
_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOLS |= {"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_INT = re.compile(r"[+-]?[0-9]+")


class WorkloadError(PermanentError, ValueError):
    """The job's Workload cannot be made or its admission applied, and trying again
    would not help (a topology annotation Kueue cannot read, an admission whose
    updates conflict: Kueue then finishes the Workload, `failed_to_start`)."""


class PriorityClass(NamedTuple):
    """A priority class the runtime must look up: `source` says which API."""

    source: str  # WORKLOAD_PRIORITY_CLASS or POD_PRIORITY_CLASS
    name: str


class Priority(NamedTuple):
    """A resolved priority: the class it came from and that class's value."""

    source: str
    name: str
    value: int


def replica_order(job: Job) -> list[str]:
    """The job's replica-spec keys in the order of its Workload's podSets: Kueue's
    order for the kind (its framework's `queue_types`), then (sorted) types Kueue does
    not list, so that every pod the job runs is in a podSet and counted against
    quota."""
    framework = framework_of(job)
    order = framework.queue_types
    rank = {rtype: index for index, rtype in enumerate(order)}
    keys = job.spec.replica_specs

    def position(key: str) -> tuple[int, str]:
        canonical = framework.canonical_type(key)
        return rank.get(canonical or "", len(order)), key

    return sorted(keys, key=position)


def pod_sets(job: Job) -> list[dict[str, Any]]:
    """One podSet per replica type: its lower-case name, its replicas (the kind's
    default when unset), its pod template with each container's env made unique
    (the last value of a name, at its first place, as Kueue sanitizes it), and the
    topology request its template's annotations make."""
    framework = framework_of(job)
    out = []
    for key in replica_order(job):
        spec = job.spec.replica_specs[key]
        canonical = framework.canonical_type(key) or key
        count = (
            spec.replicas if spec.replicas is not None else framework.default_replicas(canonical)
        )
        pod_set: dict[str, Any] = {
            "name": key.lower(),
            "template": sanitized_template(spec.template),
            "count": count,
        }
        low = _min_count(job, canonical, count)
        if low is not None:
            pod_set["minCount"] = low
        pod_set["topologyRequest"] = topology_request(spec)
        out.append(pod_set)
    return out


def _min_count(job: Job, replica_type: str, count: int) -> int | None:
    """The Workers' least acceptable count when the kind's Workers adapt to their
    number (`Framework.fewest_workers`: an elastic PyTorchJob's minReplicas) and it
    is below the Workers' replicas: Kueue may then admit fewer Workers than asked
    (partial admission), at least this many. A PaddleJob's elasticPolicy gives its
    pods no elastic env (Kubeflow v1.9.4 ignores it), so it asks for every Worker."""
    low = framework_of(job).fewest_workers(job)
    if replica_type != c.WORKER or low is None:
        return None
    return low if 1 <= low < count else None


def sanitized_template(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of the template whose containers each name a variable once."""
    out = copy.deepcopy(template)
    spec = out.get("spec") or {}
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if container.get("env"):
                container["env"] = _unique_env(container["env"])
    return out


def _unique_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last: dict[str, dict[str, Any]] = {}
    for variable in env:
        last[variable.get("name", "")] = variable  # keeps the first place, last value
    return list(last.values())


def topology_request(spec: ReplicaSpec) -> dict[str, Any]:
    """The podSet's topology request (jobframework NewPodSetTopologyRequest): the
    level its template requires, prefers or leaves unconstrained, a slice layer,
    and always the label that numbers the pods (a kubeflow job's replica index),
    since Kueue runs with Topology-Aware Scheduling on by default."""
    notes: dict[str, str] = (spec.template.get("metadata") or {}).get("annotations") or {}
    request: dict[str, Any] = {}
    if _REQUIRED in notes:
        request["required"] = notes[_REQUIRED]
    elif _PREFERRED in notes:
        request["preferred"] = notes[_PREFERRED]
    elif _UNCONSTRAINED in notes:
        request["unconstrained"] = _parse_bool(notes[_UNCONSTRAINED], _UNCONSTRAINED)
    if _SLICE_REQUIRED in notes and _SLICE_SIZE in notes:
        request["podSetSliceRequiredTopology"] = notes[_SLICE_REQUIRED]
        request["podSetSliceSize"] = _parse_int32(notes[_SLICE_SIZE], _SLICE_SIZE)
    request["podIndexLabel"] = c.LABEL_REPLICA_INDEX
    if _GROUP_NAME in notes and ("required" in request or "preferred" in request):
        request["podSetGroupName"] = notes[_GROUP_NAME]
    return request


def _parse_bool(text: str, annotation: str) -> bool:
    if text not in _BOOLS:
        raise WorkloadError(f"annotation {annotation}: {text!r} is not a boolean")
    return _BOOLS[text]


def _parse_int32(text: str, annotation: str) -> int:
    if not _INT.fullmatch(text) or not -(2**31) <= int(text) < 2**31:
        raise WorkloadError(f"annotation {annotation}: {text!r} is not a 32-bit integer")
    return int(text)


def wanted_priority_class(job: Job) -> PriorityClass | None:
    """The class the job's priority comes from, in Kueue's precedence
    (jobframework ExtractPriority, kubeflowjob PriorityClass): the
    WorkloadPriorityClass its label names; else the PriorityClass of
    runPolicy.schedulingPolicy.priorityClass; else the first podSet's template
    (in Kueue's order) that names one. None: the cluster's default PriorityClass
    (the globalDefault one of least value), or priority 0 if there is none."""
    label = job.metadata.labels.get(PRIORITY_CLASS_LABEL)
    if label:
        return PriorityClass(WORKLOAD_PRIORITY_CLASS, label)
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return PriorityClass(POD_PRIORITY_CLASS, policy.priority_class)
    for key in replica_order(job):
        named = (job.spec.replica_specs[key].template.get("spec") or {}).get("priorityClassName")
        if named:
            return PriorityClass(POD_PRIORITY_CLASS, str(named))
    return None


def workload_manifest(
    job: Job,
    *,
    priority: Priority | None,
    label_keys_to_copy: Collection[str] = (),
    short_name: bool = False,
) -> dict[str, Any]:
    """The Workload for a job that names a queue (pass the job as stored, not
    defaulted: Kueue copies the templates as the API server holds them).

    `priority`: the class `wanted_priority_class` named, resolved by the runtime
    (None: no class, priority 0). `label_keys_to_copy`: Kueue's
    integrations.labelKeysToCopy. `short_name`: Kueue's ShortWorkloadNames gate.
    Raises WorkloadError for a template annotation Kueue cannot read."""
    queue = queue_name(job)
    if queue is None:
        raise WorkloadError(f"{job.metadata.name} names no queue: it has no Workload")
    framework = framework_of(job)
    spec: dict[str, Any] = {"queueName": queue, "podSets": pod_sets(job)}
    limit = max_execution_seconds(job)
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    spec.update(priority_fields(priority))
    meta: dict[str, Any] = {
        "name": workload_name(job, short=short_name),
        "namespace": job.metadata.namespace,
    }
    labels = dict(_labels(job, label_keys_to_copy))
    if labels:
        meta["labels"] = labels
    notes = {k: v for k, v in job.metadata.annotations.items() if k.startswith(PROV_REQ_PREFIX)}
    if notes:
        meta["annotations"] = notes
    meta["finalizers"] = [FINALIZER]
    meta["ownerReferences"] = [owner_reference(job, framework)]
    return {"apiVersion": API_VERSION, "kind": "Workload", "metadata": meta, "spec": spec}


def priority_fields(priority: Priority | None) -> dict[str, Any]:
    """spec.priorityClassRef and spec.priority for a resolved priority."""
    if priority is None:
        return {"priority": 0}
    group, kind = _REF_OF_SOURCE[priority.source]
    ref = {"group": group, "kind": kind, "name": priority.name}
    return {"priorityClassRef": ref, "priority": priority.value}


def _labels(job: Job, keys: Collection[str]) -> Iterator[tuple[str, str]]:
    for key, value in job.metadata.labels.items():
        if key in keys:
            yield key, value
    if is_label_value(job.metadata.uid):
        yield JOB_UID_LABEL, job.metadata.uid
