"""The seam between what every kind of job shares and what one kind declares.

A framework is one kind of kubeflow.org/v1 job (TFJob, PyTorchJob, ...): a subclass of
`Framework` in one file of this package that sets the kind's names and defaults (the
`KindDeclaration` attributes) and overrides the hooks below for what only that kind
does. Everything else (restarts, backoff, deadlines, TTL, cleanup, suspend, managedBy,
gang scheduling, conditions, events) is the core's, shared by every kind; the core
asks `framework_of(job)` for the kind's part and never tests a kind's name.

Every hook is pure: data in, data out, no clock, environment or file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.containers import container_port
from tfjob.api.defaults import default_replica_specs, default_run_policy
from tfjob.api.errors import FieldError
from tfjob.api.kinds import KindDeclaration
from tfjob.api.names import object_name, replica_key
from tfjob.api.observed import Pod
from tfjob.api.types import Job, ReplicaSpec, ReplicaStatus
from tfjob.api.validation import check_job, check_replica_specs
from tfjob.frameworks.settings import Settings

J = TypeVar("J", bound=Job)

#: One environment variable, in the wire shape of a container's `env` entry.
EnvVar = dict[str, Any]


class PodEnv:
    """The env a kind gives each replica of one defaulted job.

    Built once per job and asked once per pod, so work every pod shares (TF_CONFIG's
    cluster, encoded once) is done once.
    """

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        """The variables appended to the pod's containers, in order."""
        return []


class Framework(KindDeclaration, Generic[J]):
    """One kind: its declaration and its rules. Subclasses set the declaration's
    attributes and `job_type`, and override the hooks they need."""

    job_type: type[J]
    # Whether the kind's env goes to every container of a pod (upstream's PyTorchJob
    # and most kinds) or only to the training container (TFJob's TF_CONFIG).
    env_on_every_container: bool = False
    # The variables the kind's env sets (fnmatch patterns): a local replica never
    # inherits them from the runtime's own environment, where they would mislead it
    # (e.g. a RANK from the shell in a pod upstream gives no RANK).
    owned_env: tuple[str, ...] = ()
    # What a pod takes from its template's metadata besides the labels.
    template_metadata: tuple[str, ...] = ("annotations", "finalizers")

    # --- the job as the core sees it ------------------------------------------------

    def with_defaults(self, job: J) -> J:
        """A copy of `job` with every upstream default applied, in upstream's order:
        cleanPodPolicy, replica-type case, replicas, restartPolicy, the default port,
        then the kind's own (`default_spec`)."""
        spec = msgspec.structs.replace(
            job.spec,
            run_policy=default_run_policy(job.spec.run_policy),
            **{job.spec.REPLICA_SPECS: default_replica_specs(job.spec.replica_specs, self)},
        )
        spec = self.default_spec(spec)
        return msgspec.structs.replace(job, spec=spec)

    def default_spec(self, spec: Any) -> Any:
        """Hook: the kind's defaults on a spec whose shared defaults are applied."""
        return spec

    def validate(self, job: J, *, require_image: bool = True) -> list[FieldError]:
        """All problems in `job` as stored (before defaulting); empty: it can run."""
        return [
            *check_job(job, self),
            *self.check_spec(job),
            *check_replica_specs(job, self, require_image=require_image),
        ]

    def check_spec(self, job: J) -> Iterator[FieldError]:
        """Hook: the kind's checks of its own spec fields."""
        yield from ()

    def fewest_workers(self, job: J) -> int | None:
        """Hook: the fewest Workers `job` (as stored) runs correctly with, for a kind
        whose Workers adapt to how many of them start; None: the job needs every
        replica it lists. A queued job's Workload offers Kueue this as the Workers'
        `minCount` (partial admission), so it must hold only where the pods' env
        lets the training adapt, not wherever a spec field is called elastic."""
        return None

    def admission(
        self, document: dict[str, Any], *, require_image: bool, rules: bool
    ) -> list[FieldError]:
        """What the API server's CRD schema (the kind's `schema_file`) and, with
        `rules`, its CEL rules would refuse in `document`."""
        return schema_rules.check(
            document, self.schema_file, require_image=require_image, rules=rules
        )

    # --- pods -----------------------------------------------------------------------

    def pod_env(self, job: J, settings: Settings) -> PodEnv:
        """Hook: the env of every replica of a defaulted job."""
        return PodEnv()

    def decorate_pod_spec(
        self, job: J, replica_type: str, index: int, settings: Settings, pod_spec: dict[str, Any]
    ) -> None:
        """Hook: add the kind's extra pod parts (e.g. an init container) in place."""

    def local_files(self, job: J) -> dict[str, tuple[str, int]]:
        """Hook: the files a local run provides in place of what a cluster mounts from
        the job's own objects (MPIJob: a hostfile of this machine's slots and an rsh
        agent that runs here), as name -> (content, mode). The local runtime writes
        them to a folder of its own, named in `Settings.local_files_dir`."""
        return {}

    def replica_port(self, spec: ReplicaSpec) -> int:
        """The replica's port: the one named `port_name` on the training container
        (defaulting puts it there), else the kind's default."""
        found = container_port(spec.template.get("spec"), self.container_name, self.port_name)
        return self.port if found is None else found

    def first_endpoint(self, job: J, settings: Settings, replica_type: str) -> tuple[str, str]:
        """(host, port) at which replica 0 of `replica_type` is reached: the address the
        local runtime chose for it, else its service name and the port its spec names
        (the kind's default port without a spec)."""
        local = local_endpoint(settings, replica_type)
        if local is not None:
            return local
        spec = job.spec.replica_specs.get(replica_type)
        port = self.replica_port(spec) if spec is not None else self.port
        return object_name(job.metadata.name, replica_type, 0), str(port)

    def has_master(self, job: J) -> bool:
        """Whether the job has one of the kind's master types (Chief, Master, ...)."""
        return any(t in self.master_types for t in job.spec.replica_specs)

    def is_master_role(self, job: J, replica_type: str, index: int) -> bool:
        """The pod labelled job-role=master: the master type's, else Worker 0."""
        if self.has_master(job):
            return replica_type in self.master_types
        return replica_type == c.WORKER and index == 0

    # --- objects besides pods and services -------------------------------------------

    def owned_objects(
        self, job: J, pods: Sequence[Pod], settings: Settings
    ) -> list[dict[str, Any]]:
        """Hook: the objects of the kind's `owned_kinds` a running, defaulted job wants
        now (`pods`: its pods as observed), as full manifests with the job's
        ownerReference (`api.owners.owner_reference`). The core adds the labels the
        runtime watches them by and writes only each kind's owned fields
        (core/owned.py)."""
        return []

    # --- status ---------------------------------------------------------------------

    def reconciles_replicas(self, job: J, replica_type: str, pods: Sequence[Pod]) -> bool:
        """Hook: whether this type's pods are created, restarted and counted in this
        pass (MPIJob: not its Workers once the Launcher has finished)."""
        return True

    def failed_reason(self, job: J, replica_type: str, pods: Sequence[Pod]) -> str:
        """Hook: the Failed condition's reason when this type's replicas (`pods`)
        failed: `<Kind>Failed` (MPIJob: `MPIJobEvicted` for an evicted pod)."""
        return self.reason("Failed")

    def workers_succeeded(self, job: J, counts: ReplicaStatus, pods: Sequence[Pod]) -> bool:
        """Hook: without a master, whether the Workers' counts and pods mean success.
        By default: every Worker succeeded."""
        return (job.spec.replica_specs[c.WORKER].replicas or 0) - counts.succeeded == 0

    def tolerates_failure(self, job: J, replica_type: str) -> bool:
        """Hook: whether a failed replica of this type leaves the job running."""
        return False

    #: The conditions' messages by outcome ("running", "succeeded", "failed"), as
    #: upstream words them for the kind; formatted with kind, name, namespace and, for
    #: "failed", count and rtype. `master_messages` replace some when the job has a
    #: master type. These are the words upstream's v1 kinds share; TFJob has its own.
    messages: dict[str, str] = {
        "running": "{kind} {namespace}/{name} is running.",
        "succeeded": "{kind} {namespace}/{name} successfully completed.",
        "failed": "{kind} {name} is failed because {count} {rtype} replica(s) failed.",
    }
    master_messages: dict[str, str] = {
        "running": "{kind} {name} is running.",
        "succeeded": "{kind} {name} is successfully completed.",
    }
    #: Whether each replica type's status carries `selector` (its pods' label selector,
    #: the scale subresource's labelSelectorPath): the kinds with a scale subresource.
    status_selector: bool = False

    def message(self, outcome: str, job: J, **values: object) -> str:
        """The condition message of `outcome` for `job`, in the kind's words."""
        texts = self.master_messages if self.has_master(job) else {}
        template = texts.get(outcome) or self.messages[outcome]
        meta = job.metadata
        return template.format(kind=self.kind, name=meta.name, namespace=meta.namespace, **values)


def local_endpoint(settings: Settings, replica_type: str, index: int = 0) -> tuple[str, str] | None:
    """(host, port) of one replica in the local runtime's addresses, if any
    (`Settings.local_addresses`: on one machine a replica is reached at 127.0.0.1 and
    the port the runtime chose for it, not at its service name and its own port)."""
    chosen = (settings.local_addresses or {}).get(replica_key(replica_type)) or []
    if len(chosen) <= index:
        return None
    host, port = chosen[index].rsplit(":", 1)
    return host, port
