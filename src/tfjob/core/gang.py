"""Gang scheduling: a job's pods are placed all together or not at all.

Without it, a busy cluster can place 3 of a job's 4 workers and leave them idle,
holding their resources, until a 4th fits. With it, the job gets a group object that
tells a gang-aware scheduler how many of its pods must fit at once, and every pod is
tied to that group. Four backends, chosen by the scheduler's name
(``--gang-scheduler-name``):

- ``default-scheduler``: native Kubernetes (1.36+, alpha): a ``Workload`` and a
  ``PodGroup`` (``scheduling.k8s.io/v1alpha2``) with a gang policy, and each pod's
  ``spec.schedulingGroup`` naming the group;
- ``volcano``: Volcano's ``PodGroup`` (``scheduling.volcano.sh/v1beta1``), the
  group-name annotation; pods are only created once Volcano has admitted the group;
- ``kube-batch``: kube-batch's ``PodGroup`` (``scheduling.incubator.k8s.io/v1alpha1``)
  and the group-name annotation;
- any other name: the scheduler-plugins coscheduling ``PodGroup``
  (``scheduling.x-k8s.io/v1alpha1``) and its pod-group label.

The scheduler's name goes on every pod whose template names none; a template that
names another scheduler keeps it, with a Warning event. Pure: manifests in, manifests
out.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from tfjob.api.owners import owner_reference
from tfjob.api.types import Job
from tfjob.core.plan import Event, GroupKind
from tfjob.frameworks.registry import framework_of

NATIVE_SCHEDULER = "default-scheduler"
VOLCANO_SCHEDULER = "volcano"
KUBE_BATCH_SCHEDULER = "kube-batch"

#: The annotation Volcano and kube-batch read to find a pod's group.
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
#: Volcano's per-task annotation (the lower-case replica type).
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
#: The label scheduler-plugins' coscheduling plugin reads.
PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: The one pod group template of a job's native Workload.
NATIVE_TEMPLATE = "replicas"

_WARNING_MESSAGE = (
    "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten"
)
#: Kubeflow's reason since v1.8; kube-batch, as tf-operator did, uses its older spelling.
_WARNING_REASON = "SetPodTemplateSchedulerName"
_SEED_WARNING_REASON = "SettedPodTemplateSchedulerName"


class Backend(enum.Enum):
    NATIVE = "native"
    VOLCANO = "volcano"
    KUBE_BATCH = "kube-batch"
    PLUGINS = "scheduler-plugins"


NATIVE_WORKLOAD = GroupKind("scheduling.k8s.io", "v1alpha2", "Workload", "workloads")
NATIVE_POD_GROUP = GroupKind("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups")
VOLCANO_POD_GROUP = GroupKind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
KUBE_BATCH_POD_GROUP = GroupKind("scheduling.incubator.k8s.io", "v1alpha1", "PodGroup", "podgroups")
PLUGINS_POD_GROUP = GroupKind("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")

#: The group objects whose spec follows the job (the native ones' spec is immutable).
_MUTABLE = frozenset({VOLCANO_POD_GROUP, KUBE_BATCH_POD_GROUP, PLUGINS_POD_GROUP})

_KINDS = {
    Backend.NATIVE: (NATIVE_WORKLOAD, NATIVE_POD_GROUP),
    Backend.VOLCANO: (VOLCANO_POD_GROUP,),
    Backend.KUBE_BATCH: (KUBE_BATCH_POD_GROUP,),
    Backend.PLUGINS: (PLUGINS_POD_GROUP,),
}


def backend(scheduler_name: str) -> Backend | None:
    """Which gang backend a scheduler name selects; None (empty name) is off."""
    if not scheduler_name:
        return None
    if scheduler_name == NATIVE_SCHEDULER:
        return Backend.NATIVE
    if scheduler_name.lower() == VOLCANO_SCHEDULER:
        return Backend.VOLCANO
    if scheduler_name == KUBE_BATCH_SCHEDULER:
        return Backend.KUBE_BATCH
    return Backend.PLUGINS


def pod_scheduler_name(scheduler_name: str) -> str:
    """The name put on pods: Volcano's is lower-case whatever the flag's spelling."""
    return VOLCANO_SCHEDULER if backend(scheduler_name) is Backend.VOLCANO else scheduler_name


def group_kinds(scheduler_name: str) -> tuple[GroupKind, ...]:
    """The group objects' kinds, in creation order (a Workload before its PodGroup)."""
    chosen = backend(scheduler_name)
    return _KINDS[chosen] if chosen else ()


def holds_pods(scheduler_name: str) -> bool:
    """Volcano: no pod is created until Volcano has moved the PodGroup past Pending."""
    return backend(scheduler_name) is Backend.VOLCANO


def admitted(group: dict[str, Any]) -> bool:
    """Whether an observed Volcano PodGroup lets pods be created (phase set, not Pending)."""
    phase = (group.get("status") or {}).get("phase") or ""
    return phase not in ("", "Pending")


# -- group objects ---------------------------------------------------------------------


def min_member(job: Job) -> int:
    """schedulingPolicy.minAvailable, else every replica of the job (nil counts 1)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.min_available is not None:
        return policy.min_available
    return total_replicas(job)


def total_replicas(job: Job) -> int:
    return sum(
        1 if spec.replicas is None else spec.replicas for spec in job.spec.replica_specs.values()
    )


def group_objects(job: Job, scheduler_name: str) -> list[dict[str, Any]]:
    """The group objects the job needs, in creation order; empty when gang is off."""
    chosen = backend(scheduler_name)
    if chosen is Backend.NATIVE:
        return [_workload(job), _native_pod_group(job)]
    if chosen is Backend.VOLCANO:
        return [_pod_group(job, VOLCANO_POD_GROUP, _volcano_spec(job))]
    if chosen is Backend.KUBE_BATCH:
        return [_pod_group(job, KUBE_BATCH_POD_GROUP, {"minMember": total_replicas(job)})]
    if chosen is Backend.PLUGINS:
        return [_pod_group(job, PLUGINS_POD_GROUP, _plugins_spec(job))]
    return []


def updated_group(
    kind: GroupKind, observed: dict[str, Any], computed: dict[str, Any]
) -> dict[str, Any] | None:
    """The observed group object with the computed spec, when that changes its spec.

    The spec is replaced whole (fields the job no longer sets go), as upstream does;
    the metadata stays as observed (annotations are the job's at creation only, and
    the `resourceVersion` makes the write fail if the group changed meanwhile).
    Volcano keeps a queue the group already has: whoever set it (a queueing system,
    an administrator) decides where the job waits. None for a native object (its
    spec is immutable), one being deleted, or one that already has this spec.
    """
    if kind not in _MUTABLE or (observed.get("metadata") or {}).get("deletionTimestamp"):
        return None
    current: dict[str, Any] = observed.get("spec") or {}
    spec = dict(computed["spec"])
    if kind == VOLCANO_POD_GROUP and current.get("queue"):
        spec["queue"] = current["queue"]
    if _same_spec(current, spec):
        return None
    return {**observed, "spec": spec}


def _same_spec(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Equal, comparing minResources as quantities ("1Gi" is "1024Mi"), as Kubernetes
    compares them: a group written with other spellings is not rewritten for that."""
    if current.keys() != wanted.keys():
        return False
    for key, value in wanted.items():
        if key == "minResources":
            if not _same_quantities(current[key], value):
                return False
        elif current[key] != value:
            return False
    return True


def _same_quantities(current: Any, wanted: dict[str, str]) -> bool:
    if not isinstance(current, dict) or current.keys() != wanted.keys():
        return False
    try:
        return all(
            parse_quantity(str(current[name]))[0] == parse_quantity(value)[0]
            for name, value in wanted.items()
        )
    except ArithmeticError:  # not a quantity (decimal.InvalidOperation): unequal
        return False


def _metadata(job: Job, *, annotations: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": job.metadata.name,
        "namespace": job.metadata.namespace,
    }
    if annotations and job.metadata.annotations:
        meta["annotations"] = dict(job.metadata.annotations)
    meta["ownerReferences"] = [owner_reference(job, framework_of(job))]
    return meta


def _pod_group(job: Job, kind: GroupKind, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": _metadata(job),
        "spec": spec,
    }


def _volcano_spec(job: Job) -> dict[str, Any]:
    policy = job.spec.run_policy.scheduling_policy
    members = min_member(job)
    spec: dict[str, Any] = {"minMember": members, "queue": (policy and policy.queue) or "default"}
    if policy is not None and policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
    resources = min_resources(job, members)
    if resources:
        spec["minResources"] = resources
    return spec


def _plugins_spec(job: Job) -> dict[str, Any]:
    policy = job.spec.run_policy.scheduling_policy
    members = min_member(job)
    spec: dict[str, Any] = {"minMember": members}
    resources = min_resources(job, members)
    if resources:
        spec["minResources"] = resources
    if policy is not None and policy.schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    return spec


def _gang_policy(job: Job) -> dict[str, Any]:
    return {"gang": {"minCount": max(min_member(job), 1)}}


def _workload(job: Job) -> dict[str, Any]:
    template: dict[str, Any] = {"name": NATIVE_TEMPLATE, "schedulingPolicy": _gang_policy(job)}
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        template["priorityClassName"] = policy.priority_class
    return {
        "apiVersion": NATIVE_WORKLOAD.api_version,
        "kind": NATIVE_WORKLOAD.kind,
        "metadata": _metadata(job, annotations=False),
        "spec": {
            "controllerRef": {
                "apiGroup": framework_of(job).group,
                "kind": framework_of(job).kind,
                "name": job.metadata.name,
            },
            "podGroupTemplates": [template],
        },
    }


def _native_pod_group(job: Job) -> dict[str, Any]:
    """The runtime group, made from the Workload's one template (same policy)."""
    spec: dict[str, Any] = {
        "podGroupTemplateRef": {
            "workload": {
                "workloadName": job.metadata.name,
                "podGroupTemplateName": NATIVE_TEMPLATE,
            }
        },
        "schedulingPolicy": _gang_policy(job),
    }
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        spec["priorityClassName"] = policy.priority_class
    return {
        "apiVersion": NATIVE_POD_GROUP.api_version,
        "kind": NATIVE_POD_GROUP.kind,
        "metadata": _metadata(job, annotations=False),
        "spec": spec,
    }


# -- minResources ----------------------------------------------------------------------


def min_resources(job: Job, members: int) -> dict[str, str] | None:
    """schedulingPolicy.minResources, else what the first `members` pods request.

    Pods are walked replica type by replica type (in name order: priorities would need
    a PriorityClass lookup the core cannot make, and upstream's order is random), each
    container adding its requests, or its limits when it has no requests.
    """
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.min_resources:
        return {str(k): str(v) for k, v in policy.min_resources.items()}
    totals: dict[str, list[str]] = {}
    counted = 0
    for rtype in sorted(job.spec.replica_specs):
        spec = job.spec.replica_specs[rtype]
        replicas = 1 if spec.replicas is None else spec.replicas
        for _ in range(replicas):
            if counted >= members:
                break
            counted += 1
            for name, value in _pod_requests(spec.template):
                totals.setdefault(name, []).append(value)
    return {name: add_quantities(values) for name, values in sorted(totals.items())} or None


def _pod_requests(template: dict[str, Any]) -> Iterable[tuple[str, str]]:
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amounts = resources.get("requests")
        if amounts is None:
            amounts = resources.get("limits") or {}
        for name, value in amounts.items():
            yield str(name), str(value)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(text: str) -> tuple[Decimal, bool]:
    """A Kubernetes quantity as (value, written with a binary suffix)."""
    text = text.strip()
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * factor, True
    for suffix in ("n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * _DECIMAL[suffix], False
    return Decimal(text), False


def add_quantities(values: Iterable[str]) -> str:
    """The sum, written the way Kubernetes writes it (in the first value's format)."""
    parsed = [parse_quantity(v) for v in values]
    total = sum((value for value, _ in parsed), Decimal(0))
    binary = bool(parsed) and parsed[0][1]
    if binary and total == total.to_integral_value():
        for suffix, factor in reversed(_BINARY.items()):
            if total >= factor and total % factor == 0:
                return f"{int(total // factor)}{suffix}"
        return str(int(total))
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        scaled = total / _DECIMAL[suffix]
        if scaled == scaled.to_integral_value() and (abs(total) >= _DECIMAL[suffix] or not total):
            return f"{int(scaled)}{suffix}"
    return f"{int((total / _DECIMAL['n']).to_integral_value())}n"


# -- pods ------------------------------------------------------------------------------


def decorate_pod(
    pod: dict[str, Any], job: Job, replica_type: str, scheduler_name: str
) -> dict[str, Any]:
    """Tie one pod manifest to the job's group and scheduler (in place; returned)."""
    chosen = backend(scheduler_name)
    if chosen is None:
        return pod
    spec = pod.setdefault("spec", {})
    if not spec.get("schedulerName"):
        spec["schedulerName"] = pod_scheduler_name(scheduler_name)
    meta = pod.setdefault("metadata", {})
    name = job.metadata.name
    if chosen is Backend.NATIVE:
        spec["schedulingGroup"] = {"podGroupName": name}
    elif chosen is Backend.PLUGINS:
        meta.setdefault("labels", {})[PLUGINS_GROUP_LABEL] = name
    else:
        annotations = meta.setdefault("annotations", {})
        annotations[GROUP_NAME_ANNOTATION] = name
        if chosen is Backend.VOLCANO:
            annotations[VOLCANO_TASK_ANNOTATION] = replica_type.lower()
    return pod


def scheduler_warning(job: Job, scheduler_name: str) -> Event | None:
    """The Warning recorded with each pod created while a template names another
    scheduler: that name is kept, so that replica is not gang-scheduled."""
    chosen = backend(scheduler_name)
    if chosen is None:
        return None
    ours = pod_scheduler_name(scheduler_name)
    for spec in job.spec.replica_specs.values():
        named = (spec.template.get("spec") or {}).get("schedulerName")
        if named and named != ours:
            reason = _SEED_WARNING_REASON if chosen is Backend.KUBE_BATCH else _WARNING_REASON
            return Event(type="Warning", reason=reason, message=_WARNING_MESSAGE)
    return None
