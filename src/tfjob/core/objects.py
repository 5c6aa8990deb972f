"""The pods and headless services the operator creates for a job, of any kind.

Pure functions of the defaulted job: the same job gives byte-for-byte the same
manifests, which is what makes `tfjob render` a faithful dry run. What differs by kind
(labels' operator name, the env, extra pod parts, the training container and its
port, the master role) comes from the job's framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any, TypeVar

import msgspec

from tfjob.api import constants as c
from tfjob.api.containers import named_container
from tfjob.api.names import label_value, object_name, replica_key
from tfjob.api.observed import Pod
from tfjob.api.owners import owner_reference
from tfjob.api.types import Job, ReplicaSpec
from tfjob.core import gang
from tfjob.core.plan import CreatePod, Event
from tfjob.core.settings import Settings
from tfjob.frameworks.framework import Framework, PodEnv
from tfjob.frameworks.registry import framework_of

J = TypeVar("J", bound=Job)

RESTART_POLICY_WARNING = Event(
    type="Warning",
    reason="SetPodTemplateRestartPolicy",
    message="Restart policy in pod template will be overwritten by restart policy in replica spec",
)


def base_labels(job_name: str, controller: str) -> dict[str, str]:
    """The selector of everything the operator made for a job (`controller`: the
    kind's operator name, `tfjob-controller`)."""
    return {
        c.LABEL_OPERATOR_NAME: controller,
        c.LABEL_JOB_NAME: label_value(job_name),
    }


def replica_labels(job_name: str, replica_type: str, index: int, controller: str) -> dict[str, str]:
    """Labels (and service selector) of one replica's pod and service."""
    return {
        **base_labels(job_name, controller),
        c.LABEL_REPLICA_TYPE: replica_key(replica_type),
        c.LABEL_REPLICA_INDEX: str(index),
    }


def replica_selector(job_name: str, replica_type: str, controller: str) -> str:
    """The label selector of one replica type's pods, as upstream writes it in a
    replica status (keys sorted): what the scale subresource's labelSelectorPath reads."""
    labels = {**base_labels(job_name, controller), c.LABEL_REPLICA_TYPE: replica_key(replica_type)}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def is_master_role(job: Job, replica_type: str, index: int) -> bool:
    """Whether the pod carries job-role=master (the kind's rule: Chief/Master pods,
    without them Worker 0)."""
    return framework_of(job).is_master_role(job, replica_type, index)


class PodRenderer:
    """Renders the pods of one job: the manifests of a plan's `CreatePod` actions.

    `job` is the job the plan was made from, as given to `reconcile` (defaulted here,
    as the core does); `replica_specs` the plan's own (`Plan.replica_specs`: an
    admitted queued job's counts and templates), which replace the defaulted job's as
    they did in the pass. Build one per plan and ask it for each manifest as the pod
    is created: the work all pods share (the kind's env, e.g. the TF_CONFIG cluster
    encoded once; each replica type's template) is done once, on the first manifest,
    and no more than one pod's copy of the cluster is held at a time.
    """

    def __init__(
        self,
        job: Job,
        settings: Settings,
        replica_specs: dict[str, ReplicaSpec] | None = None,
    ) -> None:
        self._framework: Framework[Any] = framework_of(job)
        self._job = self._framework.with_defaults(job)
        if replica_specs is not None:
            self._job = with_replica_specs(self._job, replica_specs)
        self._settings = settings

    @cached_property
    def _env(self) -> PodEnv:
        return self._framework.pod_env(self._job, self._settings)

    @cached_property
    def _templates(self) -> dict[str, bytes]:
        return {
            rtype: msgspec.json.encode(spec.template)
            for rtype, spec in self._job.spec.replica_specs.items()
        }

    def manifest(self, action: CreatePod) -> dict[str, Any]:
        """The full Pod manifest the action creates, ready to POST (a fresh dict)."""
        return self.pod(action.replica_type, action.index)

    def pod(self, replica_type: str, index: int) -> dict[str, Any]:
        """The Pod manifest for one replica."""
        job, framework = self._job, self._framework
        spec = job.spec.replica_specs[replica_type]
        template: dict[str, Any] = msgspec.json.decode(self._templates[replica_type])
        meta = template.get("metadata") or {}
        labels = {
            **(meta.get("labels") or {}),
            **replica_labels(job.metadata.name, replica_type, index, framework.controller_name),
        }
        if not framework.indexed(replica_type):
            del labels[c.LABEL_REPLICA_INDEX]
        if framework.is_master_role(job, replica_type, index):
            labels[c.LABEL_JOB_ROLE] = c.JOB_ROLE_MASTER
        metadata: dict[str, Any] = {
            "name": framework.pod_name(job.metadata.name, replica_type, index),
            "namespace": job.metadata.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(job, framework)],
        }
        for key in framework.template_metadata:
            if meta.get(key):
                metadata[key] = meta[key]
        pod_spec: dict[str, Any] = template.get("spec") or {}
        policy = spec.restart_policy
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        _append_env(pod_spec, self._env.for_replica(replica_type, index), framework)
        framework.decorate_pod_spec(job, replica_type, index, self._settings, pod_spec)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
        return gang.decorate_pod(pod, job, replica_type, self._settings.gang_scheduler_name)


def with_replica_specs(job: J, replica_specs: dict[str, ReplicaSpec]) -> J:
    """A copy of `job` whose replica specs are these (the kind's field, whatever its
    name)."""
    specs = {job.spec.REPLICA_SPECS: dict(replica_specs)}
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, **specs))


def pod_manifest(job: Job, action: CreatePod, settings: Settings) -> dict[str, Any]:
    """The Pod manifest a `CreatePod` action of `job`'s plan creates (for one pod; a
    runtime creating many builds one PodRenderer per plan)."""
    return PodRenderer(job, settings).manifest(action)


def desired_pod(job: Job, replica_type: str, index: int, settings: Settings) -> dict[str, Any]:
    """The Pod manifest for one replica of a job."""
    return PodRenderer(job, settings).pod(replica_type, index)


def creation_events(job: Job, replica_type: str) -> list[Event]:
    """Warnings upstream emits at each pod creation (a template restartPolicy, which
    the replica's restartPolicy overwrites)."""
    template_spec = job.spec.replica_specs[replica_type].template.get("spec") or {}
    return [RESTART_POLICY_WARNING] if template_spec.get("restartPolicy") else []


def _append_env(
    pod_spec: dict[str, Any], variables: list[dict[str, Any]], framework: Framework[Any]
) -> None:
    """Append the kind's env after the user's own: to every container, or only to the
    training container (TFJob's TF_CONFIG)."""
    if not variables:
        return
    if framework.env_on_every_container:
        containers = [ct for ct in pod_spec.get("containers") or [] if isinstance(ct, dict)]
    else:
        found = named_container(pod_spec, framework.container_name)
        containers = [] if found is None else [found]
    for index, container in enumerate(containers):
        env = container.setdefault("env", [])
        env += variables if index == 0 else [dict(v) for v in variables]


def desired_service(job: Job, replica_type: str, index: int) -> dict[str, Any]:
    """The headless Service giving one replica its stable DNS name.

    publishNotReadyAddresses lets peers resolve each other while they start up
    (upstream #1458), instead of failing until every pod is Ready.
    """
    framework = framework_of(job)
    labels = replica_labels(job.metadata.name, replica_type, index, framework.controller_name)
    ports = [
        {"name": p.get("name", ""), "port": p["containerPort"]}
        for p in _training_ports(job, replica_type, framework.container_name)
    ]
    spec: dict[str, Any] = {
        "clusterIP": "None",
        "selector": dict(labels),
        "publishNotReadyAddresses": True,
    }
    if ports:
        spec["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": object_name(job.metadata.name, replica_type, index),
            "namespace": job.metadata.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(job, framework)],
        },
        "spec": spec,
    }


def _training_ports(job: Job, replica_type: str, container_name: str) -> list[dict[str, Any]]:
    template = job.spec.replica_specs[replica_type].template
    container = named_container(template.get("spec"), container_name) or {}
    return list(container.get("ports") or [])


def owned_manifests(job: Job, pods: Sequence[Pod], settings: Settings) -> list[dict[str, Any]]:
    """The objects besides pods and services a defaulted job wants now (its kind's
    `owned_objects`, given its observed pods), each with the labels the Kubernetes
    runtime watches them by (the kind's operator-name and the job-name) beside its own."""
    framework = framework_of(job)
    labels = base_labels(job.metadata.name, framework.controller_name)
    manifests = framework.owned_objects(job, pods, settings)
    for manifest in manifests:
        meta = manifest["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return manifests


def desired_objects(job: Job, settings: Settings) -> list[dict[str, Any]]:
    """The gang-scheduling group objects (if on), the other objects the kind owns
    (as for a job without pods yet: core/owned.py), then every pod, then every service
    (for the kinds that have them) of a defaulted job, in replica-type order."""
    framework = framework_of(job)
    groups = gang.group_objects(job, settings.gang_scheduler_name)
    owned = owned_manifests(job, [], settings)
    pods, services = [], []
    renderer = PodRenderer(job, settings)
    for rtype, spec in sorted(job.spec.replica_specs.items()):
        for index in range(spec.replicas or 0):
            pods.append(renderer.pod(rtype, index))
            if framework.services:
                services.append(desired_service(job, rtype, index))
    return groups + owned + pods + services
