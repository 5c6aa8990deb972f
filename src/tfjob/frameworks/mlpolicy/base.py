"""What every mlPolicy source works on: the pod sets of a JobSet being built.

Trainer v2.3.0 builds a TrainJob's JobSet in steps (core/trainjob/jobset.py); one of
them lets the runtime's mlPolicy source (torch, mpi, jax, xgboost, none) set the
trainer's node count, env, ports and volumes. A source's handler here gets the pod
sets (one per replicated job, the JobSet spec's own dicts, mutated in place) and the
TrainJob, and edits them with the same upsert rules Trainer uses: env by name, volumes
by name, mounts by mount path, a port by number or by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tfjob.api.errors import PermanentError, TemporaryError
from tfjob.api.training_runtime import MLPolicy
from tfjob.api.trainjob import TrainJob
from tfjob.frameworks.mlpolicy import quantity

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE = "node"
LAUNCHER = "launcher"
#: The port the trainer's rendezvous (torch, jax, xgboost) listens on.
TRAINER_PORT = 29500
#: The pod's index in its indexed Job, as the env reads it.
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


class MLPolicyError(PermanentError, ValueError):
    """The runtime's mlPolicy cannot be applied to this TrainJob: the TrainJob fails
    with the message (Trainer retries it forever)."""


@dataclass
class PodSet:
    """One replicated job of the JobSet being built, with Trainer's pod count."""

    name: str
    ancestor: str | None
    count: int
    job: dict[str, Any]  # the replicated job in the spec being built

    @property
    def pod_spec(self) -> dict[str, Any]:
        template = self.job.setdefault("template", {}).setdefault("spec", {})
        spec: dict[str, Any] = template.setdefault("template", {}).setdefault("spec", {})
        return spec

    def container(self, name: str) -> dict[str, Any] | None:
        for c in self.pod_spec.get("containers") or []:
            if c.get("name") == name:
                return dict_of(c)
        return None

    def any_container(self, name: str) -> dict[str, Any] | None:
        """A container or, failing that, an init container of this name."""
        found = self.container(name)
        if found is not None:
            return found
        for c in self.pod_spec.get("initContainers") or []:
            if c.get("name") == name:
                return dict_of(c)
        return None


@dataclass
class NodeBuild:
    """The state one mlPolicy handler edits: the TrainJob, the runtime's policy (its
    defaults applied where read), the pod sets in the template's order, and the
    resources a node has (`resourcesPerNode`, else the runtime's node container)."""

    trainjob: TrainJob
    policy: MLPolicy
    pod_sets: list[PodSet]
    resources_per_node: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.trainjob.metadata.name

    def by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((ps for ps in self.pod_sets if ps.ancestor == ancestor), None)

    def by_name(self, name: str) -> PodSet | None:
        return next((ps for ps in self.pod_sets if ps.name == name), None)

    def trainer_container(self) -> dict[str, Any] | None:
        """The `node` container of the replicated job labelled the trainer step."""
        ps = self.by_ancestor(ANCESTOR_TRAINER)
        return None if ps is None else ps.container(NODE)

    def trainer_nodes(self) -> int:
        ps = self.by_ancestor(ANCESTOR_TRAINER)
        return 1 if ps is None else ps.count

    def set_trainer_nodes_from_job(self) -> None:
        """spec.trainer.numNodes, when given, is the trainer step's pod count."""
        trainer = self.trainjob.spec.trainer
        ps = self.by_ancestor(ANCESTOR_TRAINER)
        if ps is not None and trainer is not None and trainer.num_nodes is not None:
            ps.count = trainer.num_nodes

    def node_address(self) -> str:
        """The first trainer pod's stable name: `<tj>-node-0-0.<tj>`."""
        return f"{self.name}-{NODE}-0-0.{self.name}"


class Handler(Protocol):
    """One mlPolicy source's rules."""

    def enforce(self, build: NodeBuild) -> None:
        """Set counts, env, ports and volumes on the pod sets."""

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        """Objects besides the JobSet the source needs (MPI's Secret and ConfigMap)."""


@dataclass(frozen=True)
class KeyPair:
    """An MPI Secret's key pair: the private key as PEM ("EC PRIVATE KEY", P-521) and
    the public key as an authorized_keys line, both as the Secret holds them. The
    caller generates it (randomness is an input, like the clock)."""

    private_pem: bytes
    public_authorized_key: bytes


class KeyPairNeeded(TemporaryError):
    """The build needs a key pair and was given none: call again with one."""


@dataclass(frozen=True)
class SideParts:
    """What a source's side objects need from outside the build: the owner reference,
    whether the MPI Secret exists already (it is immutable: made once), and the key
    pair the caller generated for it (randomness is an input)."""

    owner: dict[str, Any]
    secret_exists: bool
    key_pair: KeyPair | None = None


# -- upserts, as Trainer's apply package does them ------------------------------------


def dict_of(value: Any) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value


def _upsert(items: list[dict[str, Any]], item: dict[str, Any], same: Any) -> None:
    for i, existing in enumerate(items):
        if same(existing, item):
            items[i] = item
            return
    items.append(item)


def upsert_env(container: dict[str, Any], *envs: dict[str, Any]) -> None:
    if not envs:
        return
    items = container.setdefault("env", [])
    for env in envs:
        _upsert(items, env, lambda a, b: a.get("name") == b.get("name"))


def upsert_port(container: dict[str, Any], port: dict[str, Any]) -> None:
    """By number, or by name (two unnamed ports count as the same name, as in Trainer)."""
    items = container.setdefault("ports", [])
    _upsert(
        items,
        port,
        lambda a, b: (
            a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")
        ),
    )


def upsert_volume(pod_spec: dict[str, Any], volume: dict[str, Any]) -> None:
    items = pod_spec.setdefault("volumes", [])
    _upsert(items, volume, lambda a, b: a.get("name") == b.get("name"))


def upsert_mount(container: dict[str, Any], mount: dict[str, Any]) -> None:
    items = container.setdefault("volumeMounts", [])
    _upsert(items, mount, lambda a, b: a.get("mountPath") == b.get("mountPath"))


def env_value(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def env_index(name: str) -> dict[str, Any]:
    """An env var holding the pod's completion index (its rank)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}}


def user_env(env: dict[str, Any]) -> dict[str, Any]:
    """A TrainJob's env var as Trainer copies it: a value (written even when empty) or
    one of fieldRef (its path only), resourceFieldRef, configMapKeyRef, secretKeyRef."""
    source = env.get("valueFrom")
    if source is None:
        return {"name": env.get("name", ""), "value": env.get("value", "")}
    copied: dict[str, Any] = {}
    if (ref := source.get("fieldRef")) is not None:
        copied["fieldRef"] = {"fieldPath": ref.get("fieldPath", "")}
    if (ref := source.get("resourceFieldRef")) is not None:
        copied["resourceFieldRef"] = {
            "containerName": ref.get("containerName", ""),
            "resource": ref.get("resource", ""),
            "divisor": quantity.canonical(ref.get("divisor", "0")),
        }
    for key in ("configMapKeyRef", "secretKeyRef"):
        if (ref := source.get(key)) is not None:
            kept = {"key": ref.get("key", ""), "name": ref.get("name", "")}
            if "optional" in ref:
                kept["optional"] = ref["optional"]
            copied[key] = kept
    return {"name": env.get("name", ""), "valueFrom": copied}


def user_envs(envs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [user_env(e) for e in envs]


# -- resources --------------------------------------------------------------------------


def gpus_per_node(resources: dict[str, Any]) -> int:
    """The first resource whose name holds "gpu": its request, else its limit."""

    def count(amounts: dict[str, Any] | None) -> int:
        for name, value in (amounts or {}).items():
            if "gpu" in name.lower():
                return quantity.value(value)
        return 0

    return count(resources.get("requests")) or count(resources.get("limits"))


def cpus_per_node(resources: dict[str, Any]) -> int:
    """The CPU request (rounded up), else the CPU limit, else 0."""
    request = (resources.get("requests") or {}).get("cpu")
    if request is not None and quantity.value(request) != 0:
        return quantity.value(request)
    limit = (resources.get("limits") or {}).get("cpu")
    return 0 if limit is None else quantity.value(limit)
