"""XGBoostJob (kubeflow.org/v1), the XGBoost framework, as Kubeflow v1.9.4 has it.

- Replica types Master (required, one replica: the tracker) and Worker; container
  `xgboost`, port `xgboostjob-port` 9999, restartPolicy Never by default;
  operator-name label `xgboostjob-controller`; the Master carries job-role=master.
- Env, appended to every container of a pod after the user's own, in this order:
  `MASTER_PORT` (the Master's `xgboostjob-port`), `MASTER_ADDR` (`<job>-master-0`),
  `WORLD_SIZE` (every replica), `RANK` (the index, + the Master's replicas on
  Workers), `PYTHONUNBUFFERED=1`; when there is more than one replica, `WORKER_PORT`
  (the Worker's port) and `WORKER_ADDRS` (`<job>-worker-0,...`, one fewer than
  WORLD_SIZE: the Workers).
- Locally (`Settings.local_addresses`), MASTER_ADDR/MASTER_PORT are the Master's local
  address; each Worker has its own port there, so WORKER_ADDRS lists `host:port`
  entries and WORKER_PORT is Worker 0's.
- Succeeded when the Master succeeded; a failure is handled as for every kind.
- Validation: a container named `xgboost` in every replica, only Master and Worker,
  a Master of one replica.
- Admission: the XGBoostJob CRD's schema and CEL rules (tfjob.api.schema_rules with
  `xgboostjob-v1.json`), which also make the checks above.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.errors import FieldError
from tfjob.api.names import object_name, replica_key
from tfjob.api.types import Job, JobSpec, ReplicaSpec
from tfjob.frameworks.framework import EnvVar, Framework, PodEnv, local_endpoint
from tfjob.frameworks.settings import Settings

MASTER = c.MASTER
WORKER = c.WORKER


class XGBoostJobSpec(JobSpec):
    xgb_replica_specs: dict[str, ReplicaSpec] = {}

    REPLICA_SPECS = "xgb_replica_specs"


class XGBoostJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "XGBoostJob"
    spec: XGBoostJobSpec = msgspec.field(default_factory=XGBoostJobSpec)


class XGBoost(Framework[XGBoostJob]):
    kind = "XGBoostJob"
    plural = "xgboostjobs"
    job_type = XGBoostJob
    spec_field = "xgbReplicaSpecs"
    replica_types = (MASTER, WORKER)
    queue_order = (MASTER, WORKER)  # Kueue's kubeflow/jobs/xgboostjob order
    master_types = (MASTER,)
    example_types = (MASTER, WORKER)
    container_name = "xgboost"
    port_name = "xgboostjob-port"
    port = 9999
    default_restart_policy = "Never"
    controller_name = "xgboostjob-controller"
    schema_file = schema_rules.XGBOOSTJOB_SCHEMA
    unknown_type_hint = "use Master and Worker"
    env_on_every_container = True
    owned_env = ("MASTER_PORT", "MASTER_ADDR", "WORLD_SIZE", "RANK", "WORKER_PORT", "WORKER_ADDRS")

    def check_spec(self, job: XGBoostJob) -> Iterator[FieldError]:
        for key, replica in job.spec.xgb_replica_specs.items():
            if self.canonical_type(key) == MASTER and replica.replicas not in (None, 1):
                yield FieldError(
                    f"spec.{self.spec_field}[{key}].replicas",
                    f"must be 1, got {replica.replicas}",
                    "an XGBoostJob has one Master: set replicas to 1",
                )

    def check_types(self, by_type: dict[str, list[str]]) -> Iterator[FieldError]:
        if by_type and MASTER not in by_type:
            yield FieldError(
                f"spec.{self.spec_field}[{MASTER}]",
                "must be present",
                "add a Master replica spec (one replica, the tracker every worker reports to)",
            )

    def pod_env(self, job: XGBoostJob, settings: Settings) -> PodEnv:
        return _XGBoostEnv(job, self, settings)

    def is_master_role(self, job: XGBoostJob, replica_type: str, index: int) -> bool:
        return replica_type == MASTER


XGBOOST = XGBoost()


class _XGBoostEnv(PodEnv):
    def __init__(self, job: XGBoostJob, kind: XGBoost, settings: Settings) -> None:
        specs = job.spec.xgb_replica_specs
        name = job.metadata.name
        total = sum(s.replicas or 0 for s in specs.values())
        master, worker = specs.get(MASTER), specs.get(WORKER)
        self._masters = (master.replicas or 0) if master is not None else 0
        address, port = kind.first_endpoint(job, settings, MASTER)
        self._head = [("MASTER_PORT", port), ("MASTER_ADDR", address)]
        self._world_size = str(total)
        self._tail: list[tuple[str, str]] = []
        if total > 1:
            # Upstream lists total - 1 Workers (the Master is not one) at one shared port.
            count = total - 1
            local = [e for i in range(count) if (e := local_endpoint(settings, WORKER, i))]
            if local and len(local) == count:
                addrs = [f"{host}:{port}" for host, port in local]
                worker_port = local[0][1]
            else:
                addrs = [object_name(name, WORKER, i) for i in range(count)]
                worker_port = str(kind.replica_port(worker) if worker is not None else kind.port)
            self._tail = [("WORKER_PORT", worker_port), ("WORKER_ADDRS", ",".join(addrs))]

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        rank = index + (self._masters if replica_key(replica_type) == "worker" else 0)
        env = [
            *self._head,
            ("WORLD_SIZE", self._world_size),
            ("RANK", str(rank)),
            ("PYTHONUNBUFFERED", "1"),
            *self._tail,
        ]
        return [{"name": name, "value": value} for name, value in env]
