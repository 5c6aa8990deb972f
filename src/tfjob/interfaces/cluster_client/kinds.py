"""The kinds of job the cluster commands know, and what differs in how each is read.

Two families look different on a cluster. A `kubeflow.org/v1` kind (TFJob, PyTorchJob,
...) owns its pods directly, labels them with its operator-name, job-name, replica type
and index, counts them in `status.replicaStatuses` and ends `Succeeded` or `Failed`.
Kubeflow Trainer's TrainJob (`trainer.kubeflow.org/v1alpha1`) becomes a JobSet of the
same name whose Jobs make the pods: they carry JobSet's and the Job controller's labels
only (the JobSet's name, the replicated Job's name and index, the completion index), no
count of them is kept in the TrainJob, and it ends `Complete` or `Failed`, with
`Suspended` in between.

A `ClusterKind` says those things for one kind, so the cluster client and the commands
name no kind: `ReplicaSpecKind` reads every v1 kind through its framework's declaration
(`KindDeclaration`), `TrainJobKind` reads TrainJobs. A caller may hand either a
`ClusterKind` or a v1 kind's declaration (`cluster_kind` turns it into its kind).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import yaml

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api import trainjob as tj
from tfjob.api.errors import FieldError, InvalidJob
from tfjob.api.kinds import KindDeclaration
from tfjob.api.timestamps import parse_rfc3339
from tfjob.core.progress import replica_label
from tfjob.frameworks.load import decode_job, load_jobs
from tfjob.frameworks.registry import FRAMEWORKS
from tfjob.runtimes.kubernetes.transport.resources import Resource, jobs_of, owned_by

Object = dict[str, Any]

# The labels JobSet (v0.12) and the Job controller put on a JobSet's pods.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS_LABEL = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
#: The TrainJob's trainer container in every runtime Trainer ships.
TRAINER_CONTAINER = "node"
#: The replicated Job that runs the trainer in the runtimes Trainer ships.
TRAINER_JOB = "node"

V1_INSTALL = "kubectl apply -k manifests/base, or install Kubeflow's training operator"
TRAINER_INSTALL = "kubectl apply --server-side -k manifests/base, or install Kubeflow Trainer"


class ClusterKind(ABC):
    """How the cluster commands find, read and judge one kind's jobs."""

    kind: str
    plural: str
    group: str
    version: str
    #: The condition type a finished job that went well has.
    success: str
    failure: str = c.FAILED
    #: What installs the kind's CRD, for the error when the cluster lacks it.
    install: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> Resource:
        return Resource(self.group, self.version, self.plural)

    @property
    @abstractmethod
    def declaration(self) -> KindDeclaration | ClusterKind:
        """The kind as the rest of tfjob names it: a v1 kind's framework, else itself."""

    @abstractmethod
    def pod_selector(self, job_name: str | None) -> str:
        """The label selector of one job's pods; with no name, of every job's."""

    @abstractmethod
    def owns(self, pod: Object, job: Object) -> bool:
        """Whether the pod is this job's, not a pod of an earlier job of the same name
        still going away."""

    @abstractmethod
    def replica(self, metadata: Mapping[str, Any], container: str | None = None) -> str:
        """How a pod's output is prefixed: its replica (`worker-1`, `node-0`), and
        `/container` for a container other than the kind's main one."""

    @abstractmethod
    def replicas_asked(self, job: Object) -> dict[str, int]:
        """The pods the job asks for, by replica type as written; empty when unknown."""

    @abstractmethod
    def counts(self, job: Object, pods: list[Object]) -> tuple[int, int]:
        """Replicas succeeded and failed (`pods`: the job's own)."""

    def restarts_recorded(self, job: Object) -> int:
        """Restarts the job's status records besides its pods' in-place restarts."""
        return 0

    def state(self, job: Object) -> str:
        """The job's latest condition type (e.g. "Running"), "" before the first."""
        conditions = _conditions(job)
        return str(conditions[-1].get("type", "")) if conditions else ""

    def reached(self, job: Object, wanted: str) -> bool:
        """Whether the job is in state `wanted` (a condition type)."""
        return true_condition(job, wanted) is not None

    def finished(self, job: Object) -> bool:
        return any(true_condition(job, t) for t in (self.success, self.failure))

    @abstractmethod
    def admission(self, document: Object, source: str, *, require_image: bool) -> list[FieldError]:
        """What the API server (and tfjob's own checks) would refuse in one document of
        this kind, checked before it is sent."""


class ReplicaSpecKind(ClusterKind):
    """A `kubeflow.org/v1` kind, read through its framework's declaration."""

    success = c.SUCCEEDED
    install = V1_INSTALL

    def __init__(self, declared: KindDeclaration) -> None:
        self._declared = declared
        self.kind = declared.kind
        self.plural = declared.plural
        self.group = declared.group
        self.version = declared.version

    @property
    def declaration(self) -> KindDeclaration:
        return self._declared

    @property
    def resource(self) -> Resource:
        return jobs_of(self._declared)

    def pod_selector(self, job_name: str | None) -> str:
        if job_name is None:
            return c.LABEL_JOB_NAME  # every v1 kind's pods carry it
        return f"{owned_by(self._declared)},{c.LABEL_JOB_NAME}={job_name}"

    def owns(self, pod: Object, job: Object) -> bool:
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        return any(o.get("uid") == (job.get("metadata") or {}).get("uid") for o in owners)

    def replica(self, metadata: Mapping[str, Any], container: str | None = None) -> str:
        main = self._declared.container_name
        return replica_label(metadata, container or main, main)

    def replicas_asked(self, job: Object) -> dict[str, int]:
        try:
            typed = decode_job(job, FRAMEWORKS[self.kind].job_type)
        except InvalidJob:
            return {}
        return {
            name: 1 if spec.replicas is None else spec.replicas
            for name, spec in typed.spec.replica_specs.items()
        }

    def counts(self, job: Object, pods: list[Object]) -> tuple[int, int]:
        statuses = ((job.get("status") or {}).get("replicaStatuses") or {}).values()
        return (
            sum(int(r.get("succeeded", 0)) for r in statuses),
            sum(int(r.get("failed", 0)) for r in statuses),
        )

    def restarts_recorded(self, job: Object) -> int:
        return int((job.get("status") or {}).get("restartCount", 0))

    def admission(self, document: Object, source: str, *, require_image: bool) -> list[FieldError]:
        schema_rules.cache_rule_parser()
        try:
            load_jobs(yaml.safe_dump(document), source, require_image=require_image)
        except InvalidJob as error:
            return error.errors
        return []


class TrainJobKind(ClusterKind):
    """Kubeflow Trainer's TrainJob: its pods are the pods of its JobSet's Jobs."""

    kind = tj.KIND
    plural = "trainjobs"
    group = tj.GROUP
    version = tj.VERSION
    success = tj.COMPLETE
    install = TRAINER_INSTALL

    @property
    def declaration(self) -> TrainJobKind:
        return self

    def pod_selector(self, job_name: str | None) -> str:
        # A TrainJob's JobSet has its name, and JobSet puts that name on every pod.
        return JOBSET_NAME_LABEL if job_name is None else f"{JOBSET_NAME_LABEL}={job_name}"

    def owns(self, pod: Object, job: Object) -> bool:
        """Its JobSet's pods, made after it: an earlier TrainJob of the name (whose
        pods may still be terminating) was created before this one."""
        metadata, job_metadata = pod.get("metadata") or {}, job.get("metadata") or {}
        if (metadata.get("labels") or {}).get(JOBSET_NAME_LABEL) != job_metadata.get("name"):
            return False
        made, born = metadata.get("creationTimestamp"), job_metadata.get("creationTimestamp")
        return not (made and born) or parse_rfc3339(made) >= parse_rfc3339(born)

    def replica(self, metadata: Mapping[str, Any], container: str | None = None) -> str:
        """`node-1`: the replicated Job and the pod's completion index (with the Job's
        index between them when the replicated Job has several Jobs)."""
        labels = metadata.get("labels") or {}
        job = labels.get(REPLICATED_JOB_LABEL)
        if not job:
            replica = str(metadata.get("name", ""))
        else:
            index, completion = labels.get(JOB_INDEX_LABEL), labels.get(COMPLETION_INDEX_LABEL)
            several = labels.get(REPLICATED_JOB_REPLICAS_LABEL, "1") != "1"
            parts = [job]
            parts += [index] if index is not None and (several or completion is None) else []
            parts += [completion] if completion is not None else []
            replica = "-".join(parts)
        if container is None or container in (TRAINER_CONTAINER, job):
            return replica
        return f"{replica}/{container}"

    def replicas_asked(self, job: Object) -> dict[str, int]:
        """The trainer's nodes when the TrainJob says (else its runtime decides)."""
        trainer = (job.get("spec") or {}).get("trainer") or {}
        nodes = trainer.get("numNodes")
        return {TRAINER_JOB: nodes} if isinstance(nodes, int) else {}

    def counts(self, job: Object, pods: list[Object]) -> tuple[int, int]:
        """Its pods that succeeded and failed (the TrainJob counts Jobs, not pods)."""
        phases = [str((p.get("status") or {}).get("phase", "")) for p in pods]
        return phases.count("Succeeded"), phases.count("Failed")

    def state(self, job: Object) -> str:
        """The latest condition that holds (`Suspended=False`, reason Resumed, says
        nothing now); else Running once a Job of its JobSet is active."""
        holding = [k for k in _conditions(job) if k.get("status") == "True"]
        if holding:
            return str(holding[-1].get("type", ""))
        jobs = (job.get("status") or {}).get("jobsStatus") or []
        return c.RUNNING if any(int(j.get("active", 0)) for j in jobs) else ""

    def reached(self, job: Object, wanted: str) -> bool:
        return super().reached(job, wanted) or self.state(job) == wanted

    def admission(self, document: Object, source: str, *, require_image: bool) -> list[FieldError]:
        """The TrainJob CRD's schema and rules (tfjob's, a superset of Trainer's
        webhook's checks that need only the object); the image may come from the
        runtime, so none is required."""
        if document.get("apiVersion") != self.api_version:
            return [
                FieldError(
                    "apiVersion",
                    f"must be {self.api_version!r}, got {document.get('apiVersion')!r}",
                    f"set apiVersion: {self.api_version}",
                )
            ]
        schema_rules.cache_rule_parser()
        return schema_rules.check(document, schema_rules.TRAINJOB_SCHEMA)


TRAINJOB = TrainJobKind()
#: Every kind the cluster commands know: the v1 kinds in the registry's order, then TrainJob.
CLUSTER_KINDS: tuple[ClusterKind, ...] = (
    *(ReplicaSpecKind(f) for f in FRAMEWORKS.values()),
    TRAINJOB,
)
_BY_KIND = {k.kind: k for k in CLUSTER_KINDS}


def cluster_kind(kind: KindDeclaration | ClusterKind) -> ClusterKind:
    """The cluster commands' kind for a kind's declaration (or the kind itself)."""
    return kind if isinstance(kind, ClusterKind) else _BY_KIND[kind.kind]


def kind_called(kind: str) -> ClusterKind | None:
    """The kind whose `kind` field is `kind` ("PyTorchJob"), None for another."""
    return _BY_KIND.get(kind)


def true_condition(job: Object, condition_type: str) -> Object | None:
    holding = (k for k in _conditions(job) if k.get("status") == "True")
    return next((k for k in holding if k.get("type") == condition_type), None)


def _conditions(job: Object) -> list[Object]:
    return list((job.get("status") or {}).get("conditions") or [])
