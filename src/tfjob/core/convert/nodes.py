"""PyTorchJob, JAXJob and XGBoostJob as the trainer nodes of a torch, jax or xgboost
runtime.

Their replica types (a Master, then Workers) run one program on every pod, so they
become the trainer step's `node` pods in that order: the Master is node 0, Worker i is
node i+1 (i for a JAXJob), and each pod's rank is its completion index. The trainer
gets the image, command, args and env of the training container (renamed `node`); the
v1 env (MASTER_ADDR, RANK, COORDINATOR_ADDRESS, WORKER_ADDRS, ...) is kept in the
TrainJob's env with every address rewritten to `<job>-node-0-<k>.<job>` and every
rendezvous port to 29500, the port the runtime opens.

The shipped ClusterTrainingRuntime serves the job when the template says nothing the
TrainJob cannot (`fits_shipped`); otherwise a TrainingRuntime with the same mlPolicy
and the job's own pod template is written beside it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tfjob.api.types import Job
from tfjob.core.convert import target
from tfjob.core.convert.env import address_rewriter, derive
from tfjob.core.convert.losses import Loss
from tfjob.frameworks.framework import EnvVar, Framework
from tfjob.frameworks.mlpolicy.base import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    NODE,
    cpus_per_node,
    env_index,
    gpus_per_node,
    upsert_env,
)
from tfjob.frameworks.registry import with_defaults
from tfjob.frameworks.settings import Settings

#: The retries a Job gives its pods when its template sets none (the shipped runtimes').
JOB_BACKOFF_LIMIT = 6
#: Container fields a TrainJob's trainer carries.
_TRAINER_FIELDS = ("name", "image", "command", "args", "env", "resources")
#: The variables a runtime's mlPolicy sets itself: a TrainJob may not set them.
_RUNTIME_OWNED = {
    "torch": (
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ),
    "xgboost": ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"),
    "jax": (),
}


@dataclass
class NodeConversion:
    trainjob: dict[str, Any]
    runtime: dict[str, Any] | None
    losses: list[Loss] = field(default_factory=list)


def one_program(job: Job, framework: Framework[Job]) -> bool:
    """Whether every replica type has the same template and restart policy."""
    specs = list(job.spec.replica_specs.values())
    first = specs[0]
    return (
        all(
            s.template == first.template and s.restart_policy == first.restart_policy for s in specs
        )
        and _training_container(first.template, framework) is not None
    )


def fits_shipped(job: Job, framework: Framework[Job]) -> bool:
    """Whether the shipped runtime with the TrainJob's trainer says all the template
    says: one container, only the trainer's fields, restarted OnFailure (a JobSet's
    default) and nothing else in the pod."""
    spec = next(iter(job.spec.replica_specs.values()))
    template = spec.template
    pod = template.get("spec") or {}
    containers = pod.get("containers") or []
    restart = spec.restart_policy or framework.default_restart_policy
    return (
        set(template) <= {"spec"}
        and set(pod) <= {"containers"}
        and len(containers) == 1
        and set(containers[0]) <= set(_TRAINER_FIELDS)
        and restart == target.JOBSET_RESTART
    )


def convert_nodes(job: Job, framework: Framework[Job], shipped: bool) -> NodeConversion:
    runtime_name, source = target.SHIPPED[framework.kind]
    slots = [
        (t, i)
        for t in framework.replica_types
        if t in job.spec.replica_specs
        for i in range(job.spec.replica_specs[t].replicas or 0)
    ]
    nodes = len(slots)
    spec = job.spec.replica_specs[slots[0][0]]
    container = _training_container(spec.template, framework) or {}
    losses: list[Loss] = []
    trainer: dict[str, Any] = {"image": container.get("image", "")}
    for key in ("command", "args"):
        if key in container:
            trainer[key] = list(container[key])
    nproc = _nproc(job, losses)
    env = _env(job, framework, slots, container, source, losses)
    if env:
        trainer["env"] = env
    trainer["numNodes"] = nodes
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    if shipped:
        losses.append(
            Loss(
                f"spec.{framework.spec_field}.{slots[0][0]}.restartPolicy",
                f"'OnFailure' restarts a pod at most {JOB_BACKOFF_LIMIT} times on the shipped "
                "runtime (a Job's default backoffLimit), not without limit",
            )
        )
        if "resources" in container:
            trainer["resourcesPerNode"] = container["resources"]
        ref = target.cluster_runtime_ref(runtime_name)
        return NodeConversion(target.trainjob(job, ref, trainer), None, losses)
    runtime = target.training_runtime(
        job,
        {"numNodes": nodes, source: {}},
        {"replicatedJobs": [_node_job(framework, spec.template, spec.restart_policy, nodes, env)]},
    )
    return NodeConversion(
        target.trainjob(job, target.own_runtime_ref(job), trainer), runtime, losses
    )


def _training_container(
    template: dict[str, Any], framework: Framework[Job]
) -> dict[str, Any] | None:
    for c in (template.get("spec") or {}).get("containers") or []:
        if c.get("name") == framework.container_name:
            found: dict[str, Any] = c
            return found
    return None


def _node_job(
    framework: Framework[Job],
    template: dict[str, Any],
    restart: str,
    nodes: int,
    env: list[dict[str, Any]],
) -> dict[str, Any]:
    """The trainer's `node` job from the v1 template: the training container renamed
    `node` (the TrainJob's trainer gives it the env); where the kind gives every
    container its env (PyTorchJob, ...), the others get it here."""
    pod = copy.deepcopy(template)
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == framework.container_name:
            c["name"] = NODE
        elif framework.env_on_every_container:
            upsert_env(c, *copy.deepcopy(env))
    return target.replicated_job(
        NODE,
        nodes,
        pod,
        restart or framework.default_restart_policy,
        labels={ANCESTOR_LABEL: ANCESTOR_TRAINER},
    )


def _env(
    job: Job,
    framework: Framework[Job],
    slots: list[tuple[str, int]],
    container: dict[str, Any],
    source: str,
    losses: list[Loss],
) -> list[dict[str, Any]]:
    """The user's env, then the kind's, said once for every node; the variables the
    runtime sets itself are left to it, and lost where its value differs."""
    name = job.metadata.name
    defaulted = with_defaults(job)
    kind_env = framework.pod_env(defaulted, Settings())
    ports = {str(framework.replica_port(s)) for s in defaulted.spec.replica_specs.values()}
    per_pod: list[list[EnvVar]] = []
    for t, i in slots:
        pod_env = list(container.get("env") or []) + kind_env.for_replica(t, i)
        per_pod.append([_port(var, ports) for var in pod_env])
    addresses = {slot: f"{name}-{NODE}-0-{k}.{name}" for k, slot in enumerate(slots)}
    path = f"spec.{framework.spec_field}"
    derived = derive(per_pod, address_rewriter(name, addresses), path, list(addresses.values()))
    losses.extend(derived.losses)
    first = f"{name}-{NODE}-0-0.{name}"
    nproc = _nproc(job, []) or _runtime_nproc(container.get("resources") or {})
    owned = _runtime_values(source, len(slots), first, nproc)
    env = []
    for var in derived.env:
        if var["name"] not in owned:
            env.append(var)
        elif owned[var["name"]] is not None and var != owned[var["name"]]:
            losses.append(
                Loss(
                    f"{path}.env[{var['name']}]",
                    f"set by the runtime: {_shown(owned[var['name']])} instead of {_shown(var)}",
                )
            )
    return env


def _port(var: EnvVar, ports: set[str]) -> EnvVar:
    if str(var.get("name", "")).endswith("_PORT") and var.get("value") in ports:
        return {**var, "value": str(target.RENDEZVOUS_PORT)}
    return var


def _runtime_nproc(resources: dict[str, Any]) -> str:
    """PET_NPROC_PER_NODE as a torch runtime gives it without numProcPerNode: "auto"
    with GPUs, else the node's CPU count (at least 1)."""
    if gpus_per_node(resources):
        return "auto"
    return str(max(1, cpus_per_node(resources)))


def _runtime_values(
    source: str, nodes: int, first: str, nproc: int | str
) -> dict[str, dict[str, Any] | None]:
    """What the runtime gives each variable it owns (None: a value the conversion
    does not foresee)."""
    values: dict[str, dict[str, Any] | None] = {n: None for n in _RUNTIME_OWNED[source]}
    if source == "torch":
        values["PET_NNODES"] = {"name": "PET_NNODES", "value": str(nodes)}
        values["PET_NODE_RANK"] = env_index("PET_NODE_RANK")
        values["PET_MASTER_ADDR"] = {"name": "PET_MASTER_ADDR", "value": first}
        values["PET_MASTER_PORT"] = {
            "name": "PET_MASTER_PORT",
            "value": str(target.RENDEZVOUS_PORT),
        }
        values["PET_NPROC_PER_NODE"] = {"name": "PET_NPROC_PER_NODE", "value": str(nproc)}
    return values


def _shown(var: dict[str, Any] | None) -> str:
    if var is None:
        return "its own value"
    if "value" in var:
        return repr(var["value"])
    return "the pod's completion index"


def _nproc(job: Job, losses: list[Loss]) -> int | None:
    """PyTorchJob's nprocPerNode as numProcPerNode (an integer only)."""
    nproc = getattr(job.spec, "nproc_per_node", None)
    if nproc is None:
        return None
    if str(nproc).isdigit():
        return int(nproc)
    losses.append(
        Loss(
            "spec.nprocPerNode",
            f"{nproc!r}: numProcPerNode is a number; the runtime gives 'auto' with GPUs, "
            "else the node's CPU count",
        )
    )
    return None
