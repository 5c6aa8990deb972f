"""PaddleJob (kubeflow.org/v1), the PaddlePaddle framework, as Kubeflow v1.9.4 has it.

- Replica types Master and Worker; container `paddle`, port `master` 36543,
  restartPolicy OnFailure by default; operator-name label `paddlejob-controller`; only
  a Master pod carries job-role=master (a Worker-only job has none).
- Defaults (besides the shared ones): with an elasticPolicy, minReplicas and
  maxReplicas: one set copies to the other, neither set = the Worker replicas. The
  policy is kept; v1.9.4's controller gives it no env and no autoscaler, and a
  Workload tfjob makes for it asks for every Worker (no partial admission).
- Env, appended to every container of a pod after the user's own, in this order:
  `PYTHONUNBUFFERED=1`, `PADDLE_JOB_ID` (the job's name), `PADDLE_NNODES` (every
  replica), then `PADDLE_MASTER`, the rendezvous endpoint at the `master` port: in
  collective mode (no Master) Worker 0's, in parameter-server mode Master 0's. The
  pod holding it gets `POD_IP_DUMMY` (fieldRef status.podIP) first and
  `PADDLE_MASTER=$(POD_IP_DUMMY):<port>`; the others `<job>-worker-0:<port>` or
  `<job>-master-0:<port>`. In parameter-server mode Masters also get
  `PADDLE_SERVER_NUM=1`, Workers `PADDLE_TRAINER_NUM=1`.
- Locally (`Settings.local_addresses`), the port in PADDLE_MASTER is the rendezvous
  replica's local one and the host 127.0.0.1 (status.podIP is 127.0.0.1 there too).
- Succeeded: the Master succeeded; with no Master, every Worker succeeded. A failure
  is handled as for every kind.
- Validation: a container named `paddle` in every replica, only Master and Worker;
  beyond upstream, an elasticPolicy only with Workers and minReplicas <= maxReplicas.
- Admission: the PaddleJob CRD's schema and CEL rules (tfjob.api.schema_rules with
  `paddlejob-v1.json`), which also make the checks above.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.errors import FieldError
from tfjob.api.names import replica_key
from tfjob.api.types import Job, JobSpec, ReplicaSpec
from tfjob.api.wire import Wire
from tfjob.frameworks.framework import EnvVar, Framework, PodEnv
from tfjob.frameworks.settings import Settings

MASTER = c.MASTER
WORKER = c.WORKER


class PaddleElasticPolicy(Wire):
    min_replicas: int | None = None
    max_replicas: int | None = None
    max_restarts: int | None = None
    # autoscaling/v2 MetricSpecs, kept as written.
    metrics: list[dict[str, Any]] | None = None


class PaddleJobSpec(JobSpec):
    elastic_policy: PaddleElasticPolicy | None = None
    paddle_replica_specs: dict[str, ReplicaSpec] = {}

    REPLICA_SPECS = "paddle_replica_specs"


class PaddleJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "PaddleJob"
    spec: PaddleJobSpec = msgspec.field(default_factory=PaddleJobSpec)


class Paddle(Framework[PaddleJob]):
    kind = "PaddleJob"
    plural = "paddlejobs"
    job_type = PaddleJob
    spec_field = "paddleReplicaSpecs"
    replica_types = (MASTER, WORKER)
    queue_order = (MASTER, WORKER)  # Kueue's kubeflow/jobs/paddlejob order
    master_types = (MASTER,)
    example_types = (WORKER, MASTER)
    container_name = "paddle"
    port_name = "master"
    port = 36543
    default_restart_policy = "OnFailure"
    controller_name = "paddlejob-controller"
    schema_file = schema_rules.PADDLEJOB_SCHEMA
    unknown_type_hint = "use Worker (collective mode), or Master and Worker (parameter-server mode)"
    status_selector = True  # the scale subresource's labelSelectorPath
    env_on_every_container = True
    owned_env = ("PADDLE_*", "POD_IP_DUMMY")

    def default_spec(self, spec: PaddleJobSpec) -> PaddleJobSpec:
        elastic = spec.elastic_policy
        if elastic is None:
            return spec
        low, high = elastic.min_replicas, elastic.max_replicas
        if low is None and high is None:
            worker = spec.paddle_replica_specs.get(WORKER)
            if worker is None:
                return spec  # refused by validation: an elasticPolicy needs Workers
            low = high = worker.replicas
        elastic = msgspec.structs.replace(
            elastic,
            min_replicas=high if low is None else low,
            max_replicas=low if high is None else high,
        )
        return msgspec.structs.replace(spec, elastic_policy=elastic)

    def check_spec(self, job: PaddleJob) -> Iterator[FieldError]:
        elastic = job.spec.elastic_policy
        if elastic is None:
            return
        path = "spec.elasticPolicy"
        if not any(self.canonical_type(k) == WORKER for k in job.spec.paddle_replica_specs):
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

    def pod_env(self, job: PaddleJob, settings: Settings) -> PodEnv:
        return _PaddleEnv(job, self, settings)

    def is_master_role(self, job: PaddleJob, replica_type: str, index: int) -> bool:
        """Upstream's rule: the Master's pods, and no Worker even without a Master."""
        return replica_type == MASTER


PADDLE = Paddle()


class _PaddleEnv(PodEnv):
    def __init__(self, job: PaddleJob, kind: Paddle, settings: Settings) -> None:
        specs = job.spec.paddle_replica_specs
        name = job.metadata.name
        self._ps_mode = MASTER in specs
        self._rendezvous = replica_key(MASTER if self._ps_mode else WORKER)
        host, port = kind.first_endpoint(job, settings, MASTER if self._ps_mode else WORKER)
        self._port = port
        self._endpoint = f"{host}:{port}"
        self._head = [
            ("PYTHONUNBUFFERED", "1"),
            ("PADDLE_JOB_ID", name),
            ("PADDLE_NNODES", str(sum(s.replicas or 0 for s in specs.values()))),
        ]

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        env: list[EnvVar] = [{"name": k, "value": v} for k, v in self._head]
        if replica_key(replica_type) == self._rendezvous and index == 0:
            env.append(
                {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
            )
            env.append({"name": "PADDLE_MASTER", "value": f"$(POD_IP_DUMMY):{self._port}"})
        else:
            env.append({"name": "PADDLE_MASTER", "value": self._endpoint})
        if self._ps_mode:
            role = "PADDLE_SERVER_NUM" if replica_type == MASTER else "PADDLE_TRAINER_NUM"
            env.append({"name": role, "value": "1"})
        return env
