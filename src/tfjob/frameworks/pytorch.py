"""PyTorchJob (kubeflow.org/v1), the PyTorch framework, as Kubeflow v1.9.4 has it.

- Replica types Master (exactly one replica, optional) and Worker; container `pytorch`,
  port `pytorchjob-port` 23456, restartPolicy OnFailure by default; operator-name
  label `pytorchjob-controller`; reasons `PyTorchJobRunning`, `PyTorchJobSucceeded`...
- Defaults (besides the shared ones): `nprocPerNode: auto` unless
  `elasticPolicy.nProcPerNode` is set; with an elasticPolicy, minReplicas and
  maxReplicas: one set copies to the other, neither set = the Worker replicas.
- Env, appended to every container of a pod after the user's own, in this order:
  `PYTHONUNBUFFERED=1`; with a Master: `MASTER_PORT`, `PET_MASTER_PORT` (the Master's
  `pytorchjob-port`), `MASTER_ADDR`, `PET_MASTER_ADDR` (`<job>-master-0`), `WORLD_SIZE`
  (every replica x nprocPerNode, counted as 1 unless it is a number), `RANK` and
  `PET_NODE_RANK` (the index, +1 on Workers); `PET_NPROC_PER_NODE` when nprocPerNode
  is set; with an elasticPolicy `PET_RDZV_ENDPOINT` (rdzvHost or `<job>-worker-0`, :
  rdzvPort or the Worker's port), `PET_RDZV_BACKEND` (c10d unless set), `PET_NNODES`
  (`min:max`), then when set `PET_MAX_RESTARTS`, `PET_NPROC_PER_NODE` (the
  deprecated `elasticPolicy.nProcPerNode`; `nprocPerNode` is then unset),
  `PET_RDZV_ID`, `PET_RDZV_CONF` (`k1=v1,k2=v2`), `PET_STANDALONE`; without one
  `PET_NNODES` = every replica.
- Locally (`Settings.local_addresses`), MASTER_ADDR/MASTER_PORT are the Master's
  local address and PET_RDZV_ENDPOINT Worker 0's, in place of service names.
- Workers of a job with a Master get the init container `init-pytorch`, which waits
  until the Master's name resolves (image and tries: `Settings`).
- With `elasticPolicy.metrics` the job owns a HorizontalPodAutoscaler (autoscaling/v2,
  named `<job>`, scaling the job's Worker scale subresource between minReplicas and
  maxReplicas by those metrics); its spec is kept as the job says, it is deleted
  while the job is suspended and (beyond upstream, which leaves it scaling) once the
  metrics are removed.
- Queued with `--kueue-integration=external`, an elastic job's Workload gives its
  Workers `minCount` = minReplicas (`fewest_workers`): Kueue may admit fewer
  Workers, and the env above (WORLD_SIZE, the ranks) counts those admitted.
- Succeeded: the Master succeeded; with no Master, every Worker succeeded, or with an
  elasticPolicy any Worker did. A failure is handled as for every kind.
- Validation: a container named `pytorch` in every replica, only Master and Worker, a
  Master of one replica, not both nprocPerNode and elasticPolicy.nProcPerNode; and,
  beyond upstream (which fails later, or panics), nprocPerNode `auto`, `cpu`, `gpu` or
  a number, an elasticPolicy only with Workers, minReplicas <= maxReplicas, and a
  known rdzvBackend.
- Admission: the PyTorchJob CRD's schema and CEL rules (tfjob.api.schema_rules with
  `pytorchjob-v1.json`), which also make the checks above, so a cluster without the
  operator refuses the same jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.errors import FieldError
from tfjob.api.kinds import OwnedKind
from tfjob.api.names import object_name, replica_key
from tfjob.api.observed import Pod
from tfjob.api.owners import owner_reference
from tfjob.api.types import Job, JobSpec, ReplicaSpec, ReplicaStatus
from tfjob.api.wire import Wire
from tfjob.frameworks.framework import EnvVar, Framework, PodEnv, local_endpoint
from tfjob.frameworks.settings import Settings

MASTER = c.MASTER
WORKER = c.WORKER
DEFAULT_NPROC_PER_NODE = "auto"
NPROC_PER_NODE_WORDS = ("auto", "cpu", "gpu")
DEFAULT_RDZV_BACKEND = "c10d"
RDZV_BACKENDS = ("c10d", "etcd", "etcd-v2")
INIT_CONTAINER_NAME = "init-pytorch"

HPAS = OwnedKind(
    group="autoscaling",
    version="v2",
    kind="HorizontalPodAutoscaler",
    plural="horizontalpodautoscalers",
    owned_fields=("spec",),
    prune=True,
    deleted_when_suspended=True,
)

_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # what Go's strconv.Atoi accepts


# --- the model ----------------------------------------------------------------------


class RDZVConf(Wire):
    key: str = ""
    value: str = ""


class ElasticPolicy(Wire):
    min_replicas: int | None = None
    max_replicas: int | None = None
    rdzv_backend: str | None = None
    rdzv_port: int | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: int | None = None
    max_restarts: int | None = None
    # autoscaling/v2 MetricSpecs for the job's HorizontalPodAutoscaler, kept as written.
    metrics: list[dict[str, Any]] | None = None


class PyTorchJobSpec(JobSpec):
    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = {}
    nproc_per_node: str | None = None

    REPLICA_SPECS = "pytorch_replica_specs"


class PyTorchJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "PyTorchJob"
    spec: PyTorchJobSpec = msgspec.field(default_factory=PyTorchJobSpec)


# --- the framework ------------------------------------------------------------------


class PyTorch(Framework[PyTorchJob]):
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    job_type = PyTorchJob
    spec_field = "pytorchReplicaSpecs"
    replica_types = (MASTER, WORKER)
    queue_order = (MASTER, WORKER)  # Kueue's kubeflow/jobs/pytorchjob order
    master_types = (MASTER,)
    example_types = (MASTER, WORKER)
    container_name = "pytorch"
    port_name = "pytorchjob-port"
    port = 23456
    default_restart_policy = "OnFailure"
    status_selector = True  # the scale subresource's labelSelectorPath
    controller_name = "pytorchjob-controller"
    schema_file = schema_rules.PYTORCHJOB_SCHEMA
    unknown_type_hint = "use Master or Worker"
    env_on_every_container = True
    owned_env = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_*")
    owned_kinds = (HPAS,)

    def default_spec(self, spec: PyTorchJobSpec) -> PyTorchJobSpec:
        elastic = spec.elastic_policy
        if elastic is not None:
            elastic = _default_elastic(elastic, spec.pytorch_replica_specs.get(WORKER))
        nproc = spec.nproc_per_node
        if nproc is None and (elastic is None or elastic.n_proc_per_node is None):
            nproc = DEFAULT_NPROC_PER_NODE
        return msgspec.structs.replace(spec, elastic_policy=elastic, nproc_per_node=nproc)

    def check_spec(self, job: PyTorchJob) -> Iterator[FieldError]:
        spec = job.spec
        elastic = spec.elastic_policy
        nproc = spec.nproc_per_node
        if nproc is not None and elastic is not None and elastic.n_proc_per_node is not None:
            yield FieldError(
                "spec.elasticPolicy.nProcPerNode",
                "must not be used with spec.nprocPerNode",
                "keep spec.nprocPerNode (elasticPolicy.nProcPerNode is deprecated)",
            )
        if nproc is not None and nproc not in NPROC_PER_NODE_WORDS and not _is_count(nproc):
            yield FieldError(
                "spec.nprocPerNode",
                f"must be auto, cpu, gpu or a number of processes, got {nproc!r}",
                'set it to e.g. "auto" or "4"',
            )
        for key, replica in spec.pytorch_replica_specs.items():
            if self.canonical_type(key) == MASTER and replica.replicas not in (None, 1):
                yield FieldError(
                    f"spec.{self.spec_field}[{key}].replicas",
                    f"must be 1, got {replica.replicas}",
                    "a PyTorchJob has one Master: set replicas to 1",
                )
        if elastic is not None:
            yield from self._check_elastic(job, elastic)

    def _check_elastic(self, job: PyTorchJob, elastic: ElasticPolicy) -> Iterator[FieldError]:
        path = "spec.elasticPolicy"
        if not any(self.canonical_type(k) == WORKER for k in job.spec.pytorch_replica_specs):
            yield FieldError(
                path,
                "needs a Worker replica spec (the workers are the elastic part)",
                "add a Worker replica spec or remove elasticPolicy",
            )
        low, high = elastic.min_replicas, elastic.max_replicas
        if low is not None and high is not None and low > high:
            yield FieldError(
                f"{path}.minReplicas",
                f"must not exceed maxReplicas, got {low} > {high}",
                "lower minReplicas or raise maxReplicas",
            )
        if elastic.rdzv_backend is not None and elastic.rdzv_backend not in RDZV_BACKENDS:
            yield FieldError(
                f"{path}.rdzvBackend",
                f"unknown value {elastic.rdzv_backend!r}",
                f"use one of {', '.join(RDZV_BACKENDS)}",
            )

    def fewest_workers(self, job: PyTorchJob) -> int | None:
        """elasticPolicy.minReplicas: the Workers' env tells torchrun `min:max`
        (PET_NNODES) and its rendezvous starts with any count in that range, so a
        job admitted with fewer Workers than it lists (but at least these) trains."""
        elastic = job.spec.elastic_policy
        return None if elastic is None else elastic.min_replicas

    def pod_env(self, job: PyTorchJob, settings: Settings) -> PodEnv:
        return _PyTorchEnv(job, self, settings)

    def decorate_pod_spec(
        self,
        job: PyTorchJob,
        replica_type: str,
        index: int,
        settings: Settings,
        pod_spec: dict[str, Any],
    ) -> None:
        """Workers of a job with a Master wait for the Master's name to resolve."""
        if replica_type != WORKER or MASTER not in job.spec.pytorch_replica_specs:
            return
        master = object_name(job.metadata.name, MASTER, 0)
        pod_spec["initContainers"] = [
            *(pod_spec.get("initContainers") or []),
            init_container(
                master,
                settings.pytorch_init_container_image,
                settings.pytorch_init_container_max_tries,
            ),
        ]

    def owned_objects(
        self, job: PyTorchJob, pods: Sequence[Pod], settings: Settings
    ) -> list[dict[str, Any]]:
        """The HorizontalPodAutoscaler of a job with elasticPolicy.metrics, as
        upstream's hpa.go makes it (no labels of its own)."""
        elastic = job.spec.elastic_policy
        if elastic is None or elastic.metrics is None:
            return []
        meta = job.metadata
        spec: dict[str, Any] = {
            "scaleTargetRef": {"kind": self.kind, "name": meta.name, "apiVersion": self.api_version}
        }
        if elastic.min_replicas is not None:
            spec["minReplicas"] = elastic.min_replicas
        spec["maxReplicas"] = elastic.max_replicas
        if elastic.metrics:
            spec["metrics"] = elastic.metrics
        return [
            {
                "apiVersion": HPAS.api_version,
                "kind": HPAS.kind,
                "metadata": {
                    "name": meta.name,
                    "namespace": meta.namespace,
                    "ownerReferences": [owner_reference(job, self)],
                },
                "spec": spec,
            }
        ]

    def workers_succeeded(
        self, job: PyTorchJob, counts: ReplicaStatus, pods: Sequence[Pod]
    ) -> bool:
        if super().workers_succeeded(job, counts, pods):
            return True
        return job.spec.elastic_policy is not None and counts.succeeded > 0


PYTORCH = PyTorch()


def init_container(master: str, image: str, max_tries: int) -> dict[str, Any]:
    """Upstream's `init-pytorch`: try `nslookup <master>` up to `max_tries` times, two
    seconds apart, and fail if it never resolves. Fields in Kubernetes' order."""
    script = (
        f"err=1;for i in $(seq {max_tries}); do if nslookup {master}; then err=0 && break; "
        f"fi;echo waiting for master; sleep 2; done; exit $err"
    )
    return {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "command": ["sh", "-c", script],
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
        "imagePullPolicy": "IfNotPresent",
    }


def _default_elastic(elastic: ElasticPolicy, worker: ReplicaSpec | None) -> ElasticPolicy:
    low, high = elastic.min_replicas, elastic.max_replicas
    if low is None and high is None:
        if worker is None:
            return elastic  # refused by validation: an elasticPolicy needs Workers
        low = high = worker.replicas
    return msgspec.structs.replace(
        elastic,
        min_replicas=high if low is None else low,
        max_replicas=low if high is None else high,
    )


def _is_count(value: str) -> bool:
    return bool(_INTEGER.match(value))


def nproc_count(nproc_per_node: str | None) -> int:
    """nprocPerNode as a number of processes: the number, or 1 (auto, cpu, gpu: the
    launcher decides, and WORLD_SIZE counts one per replica)."""
    return int(nproc_per_node) if nproc_per_node and _is_count(nproc_per_node) else 1


class _PyTorchEnv(PodEnv):
    """The env of one defaulted PyTorchJob's replicas: everything but the rank is the
    same for every pod, so it is computed once."""

    def __init__(self, job: PyTorchJob, kind: PyTorch, settings: Settings) -> None:
        spec = job.spec
        specs = spec.pytorch_replica_specs
        total = sum(s.replicas or 0 for s in specs.values())
        name = job.metadata.name
        self._has_master = MASTER in specs
        self._master: list[tuple[str, str]] = []
        self._world_size = str(total * nproc_count(spec.nproc_per_node))
        if self._has_master:
            address, port = kind.first_endpoint(job, settings, MASTER)
            self._master = [
                ("MASTER_PORT", port),
                ("PET_MASTER_PORT", port),
                ("MASTER_ADDR", address),
                ("PET_MASTER_ADDR", address),
            ]
        tail: list[tuple[str, str]] = []
        if spec.nproc_per_node is not None:
            tail.append(("PET_NPROC_PER_NODE", spec.nproc_per_node))
        elastic = spec.elastic_policy
        if elastic is None:
            tail.append(("PET_NNODES", str(total)))
        else:
            rdzv = local_endpoint(settings, WORKER)
            tail += _elastic_env(name, elastic, specs.get(WORKER), kind, rdzv)
        self._tail = tail

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        """A fresh list of fresh entries: no two pods share an env entry."""
        env = [("PYTHONUNBUFFERED", "1")]
        if self._has_master:
            rank = str(index + 1 if replica_key(replica_type) == "worker" else index)
            env += [
                *self._master,
                ("WORLD_SIZE", self._world_size),
                ("RANK", rank),
                ("PET_NODE_RANK", rank),
            ]
        return [{"name": name, "value": value} for name, value in [*env, *self._tail]]


def _elastic_env(
    job_name: str,
    elastic: ElasticPolicy,
    worker: ReplicaSpec | None,
    kind: PyTorch,
    local: tuple[str, str] | None,
) -> list[tuple[str, str]]:
    """`local`: the local runtime's (host, port) for the rendezvous. Every replica runs
    on that one machine, so it replaces rdzvHost and rdzvPort: worker 0's address, where
    the first agent to start hosts the c10d store."""
    host = elastic.rdzv_host
    if host is None:
        host = object_name(job_name, WORKER, 0)
    port = elastic.rdzv_port
    if port is None and worker is not None:
        port = kind.replica_port(worker)
    endpoint = ":".join(local) if local is not None else f"{host}:{port}"
    env = [
        ("PET_RDZV_ENDPOINT", endpoint),
        ("PET_RDZV_BACKEND", elastic.rdzv_backend or DEFAULT_RDZV_BACKEND),
    ]
    if elastic.min_replicas is None and elastic.max_replicas is None:
        nodes = str(worker.replicas if worker is not None else 0)
    else:
        nodes = f"{elastic.min_replicas}:{elastic.max_replicas}"
    env.append(("PET_NNODES", nodes))
    if elastic.max_restarts is not None:
        env.append(("PET_MAX_RESTARTS", str(elastic.max_restarts)))
    if elastic.n_proc_per_node is not None:  # deprecated; nprocPerNode is unset then
        env.append(("PET_NPROC_PER_NODE", str(elastic.n_proc_per_node)))
    if elastic.rdzv_id is not None:
        env.append(("PET_RDZV_ID", elastic.rdzv_id))
    if elastic.rdzv_conf:
        conf = ",".join(f"{item.key}={item.value}" for item in elastic.rdzv_conf)
        env.append(("PET_RDZV_CONF", conf))
    if elastic.standalone:
        env.append(("PET_STANDALONE", ""))
    return env
