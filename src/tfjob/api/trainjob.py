"""Typed model of Kubeflow Trainer's TrainJob (`trainer.kubeflow.org/v1alpha1`).

A TrainJob names a runtime (`spec.runtimeRef`) and overrides parts of it: the trainer
(image, command, env, nodes, resources), the initializers, and per-manager
`runtimePatches`. The core (`tfjob.core.trainjob`) turns it and its runtime into the
JobSet Trainer v2.3.0 makes.

The Kubernetes types inside it (env vars, resource requirements, secret references, the
runtime patches' JobSet parts) are kept as the plain mappings the user wrote: the CRD's
schema already pruned what Kubernetes would drop, so whatever is left survives a round
trip untouched, and the core copies them into the JobSet as they are. Everything the
core reads is typed, with the API's camelCase names on the wire. The structs are not
tracked by the garbage collector (`gc=False`, as the pods' projections: api/observed.py):
a TrainJob holds no reference cycle, and the operator caches thousands of them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tfjob.api.types import ObjectMeta
from tfjob.api.wire import Wire

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainJob"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
#: The controller that reconciles a TrainJob unless `spec.managedBy` names another.
CONTROLLER_NAME = "trainer.kubeflow.org/trainjob-controller"

# Condition types and reasons, as Trainer writes them.
SUSPENDED = "Suspended"
COMPLETE = "Complete"
FAILED = "Failed"
REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
REASON_RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"


class RuntimeRef(Wire, gc=False):
    """The runtime a TrainJob uses. The CRD defaults apiGroup and kind; a TrainJob read
    without its defaults gets them from `api_group_or_default`/`kind_or_default`."""

    name: str = ""
    api_group: str | None = None
    kind: str | None = None

    @property
    def group_or_default(self) -> str:
        return GROUP if self.api_group is None else self.api_group

    @property
    def kind_or_default(self) -> str:
        return CLUSTER_TRAINING_RUNTIME if self.kind is None else self.kind


class InitializerSource(Wire, gc=False):
    """A dataset or model initializer: where from, its env, the secret with its
    credentials (a LocalObjectReference)."""

    storage_uri: str | None = None
    env: list[dict[str, Any]] = []
    secret_ref: dict[str, Any] | None = None


class Initializer(Wire, gc=False):
    dataset: InitializerSource | None = None
    model: InitializerSource | None = None


class Trainer(Wire, gc=False):
    """What the TrainJob overrides in the runtime's trainer node. `command` and `args`
    are None when not given (an empty list given is written, as Trainer does)."""

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[dict[str, Any]] = []
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    num_proc_per_node: int | None = None


class RuntimePatch(Wire, gc=False):
    """One manager's patch of the runtime: `trainingRuntimeSpec.template.metadata`
    (the JobSet's labels and annotations) and `.template.spec` (a JobSet spec patch,
    strategic-merged), kept raw."""

    manager: str = ""
    time: str | None = None
    training_runtime_spec: dict[str, Any] | None = None


class TrainJobSpec(Wire, gc=False):
    runtime_ref: RuntimeRef = msgspec.field(default_factory=RuntimeRef)
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    runtime_patches: list[RuntimePatch] = []
    suspend: bool | None = None
    # 0: no deadline (Trainer's int64 with omitempty).
    active_deadline_seconds: int = 0
    managed_by: str | None = None

    @property
    def suspended(self) -> bool:
        return bool(self.suspend)

    @property
    def managed_by_us(self) -> bool:
        """Whether Trainer's controller (and so tfjob) reconciles this TrainJob."""
        return self.managed_by in (None, CONTROLLER_NAME)


class Condition(Wire, gc=False):
    """A metav1.Condition: reason, message and lastTransitionTime are required by the
    API, so they have no default and are always written."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: str
    observed_generation: int | None = None


class JobStatus(Wire, gc=False):
    """One replicated job's counts, copied from the JobSet's replicatedJobsStatus."""

    name: str = ""
    ready: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    active: int | None = None
    suspended: int | None = None


class TrainJobStatus(Wire, gc=False):
    conditions: list[Condition] = []
    jobs_status: list[JobStatus] = []
    # Written by the trainer's own progress reports, never by the controller: kept.
    trainer_status: dict[str, Any] | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"


class Metadata(ObjectMeta, gc=False):
    """ObjectMeta with the fields a TrainJob's or runtime's round trip keeps beyond the
    ones the core reads."""

    generate_name: str = ""
    finalizers: list[str] = []
    owner_references: list[dict[str, Any]] = []
    # Kept when given: Trainer's runtime snapshot holds the runtime's managedFields.
    managed_fields: list[dict[str, Any]] = []


class TrainJob(Wire, gc=False):
    # Empty when built in code; decoded objects keep what the API server wrote.
    api_version: str = ""
    kind: str = ""
    metadata: Metadata = msgspec.field(default_factory=Metadata)
    spec: TrainJobSpec = msgspec.field(default_factory=TrainJobSpec)
    status: TrainJobStatus = msgspec.field(default_factory=TrainJobStatus)


def decode_trainjob(document: dict[str, Any]) -> TrainJob:
    """A TrainJob from its decoded JSON or YAML (unknown fields ignored, as the CRD's
    pruning would have dropped them)."""
    return msgspec.convert(document, TrainJob, strict=False)


def encode(obj: msgspec.Struct) -> dict[str, Any]:
    """A struct in its wire shape (camelCase, defaults left out)."""
    built: dict[str, Any] = msgspec.to_builtins(obj)
    return built
