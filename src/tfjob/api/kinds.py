"""What a kind of job declares about itself: the data half of its framework.

Each kind of kubeflow.org/v1 job (TFJob, PyTorchJob, ...) is one framework
(`tfjob.frameworks`), a subclass of `KindDeclaration` that sets these attributes and
adds the kind's rules. The shared parts of the API (defaulting, validation, names)
take the declaration as an argument, so they hold no kind's names themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from tfjob.api import constants as c
from tfjob.api.errors import FieldError
from tfjob.api.names import object_name


class OwnedKind(msgspec.Struct, frozen=True, kw_only=True):
    """A kind of object, besides pods and services, that a job of some kind owns (an
    MPIJob's ConfigMap, a PyTorchJob's HorizontalPodAutoscaler), as controller-runtime's
    `Owns()` declares one: where it lives, which of its fields the operator owns, and
    when an object the job no longer wants is deleted.

    Each object carries the job's controller ownerReference and the kind's
    operator-name and job-name labels, by which the operator watches them."""

    group: str  # "" for the core API
    version: str
    kind: str
    plural: str
    # The top-level fields the operator writes and compares ("data", "spec", ...): an
    # object whose fields differ from the job's wish is updated; none: never updated.
    owned_fields: tuple[str, ...] = ()
    # Whether an observed object the running job no longer wants is deleted.
    prune: bool = False
    # Whether the job's objects of this kind are deleted while it is suspended.
    deleted_when_suspended: bool = False
    # Whether an object of this name that is not the job's (another owner, or none)
    # is accepted as it is, as upstream accepts a launcher's existing ServiceAccount;
    # otherwise it is a conflict, reported and retried.
    foreign_accepted: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class KindDeclaration:
    """The names and defaults that differ between kinds."""

    kind: str  # "TFJob"
    plural: str  # "tfjobs"
    group: str = c.GROUP
    version: str = c.VERSION
    spec_field: str  # the replica-specs field on the wire: "tfReplicaSpecs"
    # Replica types in canonical case, in the order upstream evaluates status.
    replica_types: tuple[str, ...]
    # The types that, when the job has one, carry job-role=master and decide success;
    # without one, Worker 0 carries the role and the Workers decide.
    master_types: tuple[str, ...]
    container_name: str  # the training container: env, default port, exit code
    port_name: str
    port: int
    default_restart_policy: str
    controller_name: str  # the training.kubeflow.org/operator-name label value
    schema_file: str  # its CRD's schema in tfjob/api/schema (api/schema_rules.py)
    # The hint when a replica type is not one of `replica_types` ("use Master or
    # Worker"); "" accepts unknown types, as upstream's TFJob does.
    unknown_type_hint: str = ""
    # The `framework` label of upstream's job metrics: "pytorch" for PyTorchJob.
    framework_name: str = ""
    # The replica types an error message suggests, most common first.
    example_types: tuple[str, ...]
    # Whether each replica gets a headless Service (every kind but MPIJob).
    services: bool = True
    # Whether defaulting adds the kind's port to the training container, and every
    # replica must have a container named `container_name` (every kind but MPIJob).
    default_port: bool = True
    requires_named_container: bool = True
    # Why `tfjob run` cannot run the kind's jobs on this machine ("": it can).
    local_refusal: str = ""
    # Programs a local run of the kind needs on PATH, each with what to install when
    # it is missing (MPIJob: `mpirun`); without them `tfjob run` starts nothing.
    local_programs: tuple[tuple[str, str], ...] = ()
    # Why the init containers the kind adds on a cluster are not needed locally.
    local_init_reason: str = "every replica starts at once here"
    # The objects besides pods and services its jobs own (`OwnedKind`); the Kubernetes
    # runtime watches these kinds only for the kinds that declare them.
    owned_kinds: tuple[OwnedKind, ...] = ()
    # The replica types in the order Kueue lists the kind's podSets in a Workload (its
    # integration's OrderedReplicaTypes, Kueue's own list per kind); empty, for a kind
    # Kueue does not know: `replica_types`. See `queue_types`.
    queue_order: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def scheme(self) -> str:
        """The kind's name for Kubeflow's `--enable-scheme`: "pytorchjob"."""
        return self.kind.lower()

    @property
    def metrics_name(self) -> str:
        """The metrics' `framework` label: `framework_name`, else the kind without
        "Job" in lower case (PyTorchJob: "pytorch")."""
        return self.framework_name or self.kind.removesuffix("Job").lower()

    @property
    def queue_types(self) -> tuple[str, ...]:
        """The replica types in the order of a queued job's podSets (Kueue's order for
        the kind, which may differ from `replica_types`: TFJob's Evaluator comes last),
        so that tfjob's Workload and Kueue's own integration's are one object."""
        return self.queue_order or self.replica_types

    def pod_name(self, job_name: str, replica_type: str, index: int) -> str:
        """A replica's pod (and service) name: `<job>-<type>-<index>`."""
        return object_name(job_name, replica_type, index)

    def default_replicas(self, replica_type: str) -> int:
        """A replica type's replicas when unset: 1 (MPIJob's Worker: 0)."""
        return 1

    def indexed(self, replica_type: str) -> bool:
        """Whether this type's pods carry the replica-index label (all but MPIJob's
        Launcher, which is one pod named `<job>-launcher`)."""
        return True

    def reason(self, what: str) -> str:
        """An event or condition reason with the kind's name: `TFJobRunning`."""
        return f"{self.kind}{what}"

    def canonical_type(self, key: str) -> str | None:
        """The canonical spelling of a replica-type key, or None for an unknown type."""
        lowered = key.lower()
        return next((t for t in self.replica_types if t.lower() == lowered), None)

    def check_types(self, by_type: dict[str, list[str]]) -> Iterator[FieldError]:
        """The kind's rules on which replica types a job has (`by_type`: the spec's
        keys by canonical type), checked with the shared rules on the keys."""
        yield from ()
