"""The runtime's podGroupPolicy: a gang-scheduling PodGroup for the whole JobSet.

coscheduling: a scheduler-plugins PodGroup (`scheduling.x-k8s.io/v1alpha1`) named like
the TrainJob, every pod labelled `scheduling.x-k8s.io/pod-group: <tj>`; volcano: a
Volcano PodGroup (`scheduling.volcano.sh/v1beta1`), every pod annotated
`scheduling.k8s.io/group-name: <tj>`. minMember is every pod of every replicated job;
minResources what they request together (each pod: its containers' requests, or its
largest init container's where that is more).
"""

from __future__ import annotations

from typing import Any

from tfjob.api.kinds import OwnedKind
from tfjob.api.training_runtime import PodGroupPolicy
from tfjob.core.gang import add_quantities, parse_quantity
from tfjob.frameworks.mlpolicy.base import PodSet
from tfjob.frameworks.mlpolicy.quantity import canonical

COSCHEDULING = OwnedKind(
    group="scheduling.x-k8s.io", version="v1alpha1", kind="PodGroup", plural="podgroups"
)
VOLCANO = OwnedKind(
    group="scheduling.volcano.sh", version="v1beta1", kind="PodGroup", plural="podgroups"
)
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_SCHEDULE_TIMEOUT = 60


def pod_marks(policy: PodGroupPolicy | None, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations every pod gets for its group."""
    if policy is None:
        return {}, {}
    if policy.coscheduling is not None:
        return {POD_GROUP_LABEL: name}, {}
    if policy.volcano is not None:
        return {}, {VOLCANO_GROUP_ANNOTATION: name}
    return {}, {}


def kind_of(policy: PodGroupPolicy | None) -> OwnedKind | None:
    if policy is None:
        return None
    if policy.coscheduling is not None:
        return COSCHEDULING
    return VOLCANO if policy.volcano is not None else None


def pod_group(
    policy: PodGroupPolicy | None,
    pod_sets: list[PodSet],
    metadata: dict[str, Any],
    jobset_annotations: dict[str, str],
) -> dict[str, Any] | None:
    """The PodGroup the policy asks for (None without one). `metadata`: its name,
    namespace and the TrainJob's ownerReference."""
    kind = kind_of(policy)
    if kind is None or policy is None:
        return None
    spec: dict[str, Any] = {
        "minMember": sum(ps.count for ps in pod_sets),
        "minResources": _min_resources(pod_sets),
    }
    if policy.coscheduling is not None:
        timeout = policy.coscheduling.get("scheduleTimeoutSeconds")
        spec["scheduleTimeoutSeconds"] = DEFAULT_SCHEDULE_TIMEOUT if timeout is None else timeout
    else:
        _volcano(spec, policy.volcano or {}, pod_sets, jobset_annotations)
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}


def _volcano(
    spec: dict[str, Any],
    volcano: dict[str, Any],
    pod_sets: list[PodSet],
    annotations: dict[str, str],
) -> None:
    if VOLCANO_QUEUE_ANNOTATION in annotations:
        spec["queue"] = annotations[VOLCANO_QUEUE_ANNOTATION]
    for ps in pod_sets:  # the last replicated job with a priority class names it
        if (priority := ps.pod_spec.get("priorityClassName")) is not None:
            spec["priorityClassName"] = priority
    topology = volcano.get("networkTopology")
    if topology is not None:
        spec["networkTopology"] = {
            "mode": topology.get("mode"),
            "highestTierAllowed": topology.get("highestTierAllowed"),
        }


def _min_resources(pod_sets: list[PodSet]) -> dict[str, str]:
    totals: dict[str, list[str]] = {}
    for ps in pod_sets:
        for name, value in pod_requests(ps.pod_spec).items():
            totals.setdefault(name, []).extend([value] * ps.count)
    return {name: canonical(add_quantities(values)) for name, values in sorted(totals.items())}


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, str]:
    """What one pod requests: its containers' requests added up, or an init
    container's where that is more; plus the pod's overhead."""
    summed: dict[str, list[str]] = {}
    for container in pod_spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            summed.setdefault(name, []).append(str(value))
    total = {name: add_quantities(values) for name, values in summed.items()}
    for container in pod_spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name not in total or parse_quantity(str(value))[0] > parse_quantity(total[name])[0]:
                total[name] = str(value)
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = add_quantities([total[name], str(value)]) if name in total else str(value)
    return total
