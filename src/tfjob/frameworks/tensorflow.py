"""TFJob (kubeflow.org/v1), the TensorFlow framework: what only a TFJob does.

- Replica types Chief, Evaluator, Master, PS, Worker; Chief or Master (at most one of
  them) decides success and carries job-role=master, else Worker 0.
- Container `tensorflow`, port `tfjob-port` 2222, restartPolicy Never by default.
- Env: TF_CONFIG on the `tensorflow` container only, and only when the job has more
  than one replica (below).
- Without a Chief/Master the job succeeds when every Worker did, or (successPolicy
  "", the default) when Worker 0 exited 0; with enableDynamicWorker a failed Worker
  does not fail the job.
- Admission: the TFJob CRD's schema and CEL rules (tfjob.api.schema_rules).

The model (`TFJob`, `TFJobSpec`) and TFJob's names are here, as every kind's are in its
framework; `tfjob.api.constants` keeps the two read outside this file (CONTROLLER_NAME
and the `tensorflow` container's name).

TF_CONFIG: how TensorFlow processes find each other. The JSON must be byte-identical
to upstream's Go `encoding/json` output for the same job: compact separators, cluster
keys sorted, field order cluster/task/environment (standard) or cluster{worker, ps}/task
(sparse, for enableDynamicWorker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from tfjob.api import constants as c
from tfjob.api import schema_rules
from tfjob.api.containers import tensorflow_container
from tfjob.api.errors import FieldError
from tfjob.api.names import object_name, replica_key
from tfjob.api.observed import Pod
from tfjob.api.types import Job, JobSpec, ReplicaSpec, ReplicaStatus
from tfjob.frameworks.framework import EnvVar, Framework, PodEnv
from tfjob.frameworks.settings import Settings

# Replica types in canonical case, in the order upstream evaluates status.
CHIEF = "Chief"
EVALUATOR = "Evaluator"
MASTER = c.MASTER
PS = "PS"
WORKER = c.WORKER
REPLICA_TYPES = (CHIEF, EVALUATOR, MASTER, PS, WORKER)
PORT_NAME = "tfjob-port"
PORT = 2222
SUCCESS_POLICIES = ("", "AllWorkers")


# --- the model ----------------------------------------------------------------------


class TFJobSpec(JobSpec):
    success_policy: str | None = None
    tf_replica_specs: dict[str, ReplicaSpec] = {}
    enable_dynamic_worker: bool = False

    REPLICA_SPECS = "tf_replica_specs"


class TFJob(Job):
    api_version: str = "kubeflow.org/v1"
    kind: str = "TFJob"
    spec: TFJobSpec = msgspec.field(default_factory=TFJobSpec)


# --- the framework ------------------------------------------------------------------


class TensorFlow(Framework[TFJob]):
    kind = "TFJob"
    plural = "tfjobs"
    job_type = TFJob
    spec_field = "tfReplicaSpecs"
    replica_types = REPLICA_TYPES
    queue_order = (CHIEF, MASTER, PS, WORKER, EVALUATOR)  # Kueue's kubeflow/jobs/tfjob order
    master_types = (CHIEF, MASTER)
    example_types = (PS, WORKER, CHIEF, MASTER, EVALUATOR)
    container_name = c.DEFAULT_CONTAINER_NAME
    port_name = PORT_NAME
    port = PORT
    default_restart_policy = "Never"
    controller_name = c.CONTROLLER_NAME
    schema_file = schema_rules.TFJOB_SCHEMA
    framework_name = "tensorflow"
    messages = {
        "running": "{kind} {namespace}/{name} is running.",
        "succeeded": "{kind} {namespace}/{name} successfully completed.",
        "failed": "{kind} {namespace}/{name} has failed because {count} {rtype} replica(s) failed.",
    }
    master_messages: dict[str, str] = {}  # a Chief's or Master's job: the same words
    owned_env = ("TF_CONFIG",)

    def default_spec(self, spec: TFJobSpec) -> TFJobSpec:
        return msgspec.structs.replace(spec, success_policy=spec.success_policy or "")

    def check_spec(self, job: TFJob) -> Iterator[FieldError]:
        if job.spec.success_policy not in (None, *SUCCESS_POLICIES):
            yield FieldError(
                "spec.successPolicy",
                f"unknown value {job.spec.success_policy!r}",
                'use "" (chief or worker 0 decides) or "AllWorkers"',
            )

    def check_types(self, by_type: dict[str, list[str]]) -> Iterator[FieldError]:
        if len(by_type.get(CHIEF, [])) + len(by_type.get(MASTER, [])) > 1 or (
            CHIEF in by_type and MASTER in by_type
        ):
            yield FieldError(
                f"spec.{self.spec_field}",
                "must not have more than 1 Chief or Master role",
                "keep either Chief or Master (they mean the same)",
            )

    def pod_env(self, job: TFJob, settings: Settings) -> PodEnv:
        return _TFConfigEnv(TFConfigs(job, settings))

    def workers_succeeded(self, job: TFJob, counts: ReplicaStatus, pods: Sequence[Pod]) -> bool:
        if super().workers_succeeded(job, counts, pods):
            return True
        return job.spec.success_policy != "AllWorkers" and self.worker0_completed(pods)

    def worker0_completed(self, pods: Sequence[Pod]) -> bool:
        """Worker 0's pod Succeeded and its tensorflow container exited 0."""
        for pod in pods:
            labels = pod.metadata.labels
            if labels.get(c.LABEL_REPLICA_TYPE) != replica_key(WORKER):
                continue
            if labels.get(c.LABEL_REPLICA_INDEX) != "0":
                continue
            status = pod.container_status(self.container_name)
            terminated = status.state.terminated if status is not None else None
            if pod.status.phase == "Succeeded" and terminated is not None:
                return terminated.exit_code == 0
        return False

    def tolerates_failure(self, job: TFJob, replica_type: str) -> bool:
        """With enableDynamicWorker, Workers come and go: one failing is not the job's."""
        return job.spec.enable_dynamic_worker and replica_type == WORKER


TENSORFLOW = TensorFlow()


class _TFConfigEnv(PodEnv):
    def __init__(self, configs: TFConfigs) -> None:
        self._configs = configs

    def for_replica(self, replica_type: str, index: int) -> list[EnvVar]:
        config = self._configs.for_replica(replica_type, index)
        return [] if config is None else [{"name": "TF_CONFIG", "value": config}]


def is_distributed(job: TFJob) -> bool:
    """True unless the known replica types add up to exactly one replica (a job of one
    replica gets no TF_CONFIG, as upstream)."""
    total = 0
    for key, spec in job.spec.tf_replica_specs.items():
        if key in REPLICA_TYPES:
            total += 1 if spec.replicas is None else spec.replicas
    return total != 1


def replica_port(spec: ReplicaSpec) -> int:
    """The `tfjob-port` of the tensorflow container, or 2222."""
    container = tensorflow_container(spec.template.get("spec")) or {}
    for port in container.get("ports") or []:
        if port.get("name") == PORT_NAME:
            return int(port["containerPort"])
    return PORT


def cluster_spec(job: TFJob, settings: Settings) -> dict[str, list[str]]:
    """Every replica's address (`<pod>.<namespace>.svc[.<domain>]:<port>`, or the local
    runtime's), by lower-case type, in index order."""
    if settings.local_addresses is not None:
        return {key: list(addrs) for key, addrs in settings.local_addresses.items()}
    domain = f".{settings.cluster_domain}" if settings.cluster_domain else ""
    namespace = job.metadata.namespace
    cluster: dict[str, list[str]] = {}
    for rtype, spec in job.spec.tf_replica_specs.items():
        port = replica_port(spec)
        cluster[replica_key(rtype)] = [
            f"{object_name(job.metadata.name, rtype, i)}.{namespace}.svc{domain}:{port}"
            for i in range(spec.replicas or 0)
        ]
    return cluster


class TFConfigs:
    """TF_CONFIG for every replica of one defaulted job.

    In the standard format every replica's value embeds the same cluster map, so it
    is encoded once and spliced: a 1,000-replica job would otherwise encode 1,000
    addresses 1,000 times.
    """

    def __init__(self, job: TFJob, settings: Settings) -> None:
        self._distributed = is_distributed(job)
        self._sparse = job.spec.enable_dynamic_worker
        self.cluster = cluster_spec(job, settings)
        self._encoded_cluster = _go_json(dict(sorted(self.cluster.items())))

    def for_replica(self, replica_type: str, index: int) -> str | None:
        """The value for one replica, or None if the job is not distributed."""
        if not self._distributed:
            return None
        rtype = replica_key(replica_type)
        task = _go_json({"type": rtype, "index": index})
        if self._sparse:
            return f'{{"cluster":{_go_json(_sparse(self.cluster, rtype, index))},"task":{task}}}'
        return f'{{"cluster":{self._encoded_cluster},"task":{task},"environment":"cloud"}}'


def tf_config(job: TFJob, replica_type: str, index: int, settings: Settings) -> str | None:
    """The TF_CONFIG value for one replica of a defaulted job, or None if not distributed."""
    return TFConfigs(job, settings).for_replica(replica_type, index)


def _sparse(cluster: dict[str, list[str]], rtype: str, index: int) -> dict[str, Any]:
    """Upstream's SparseClusterSpec: a worker sees itself and all PS; a PS only itself."""
    worker: dict[str, str] = {}
    ps: list[str] | None = []
    if rtype == "ps":
        ps = [cluster[rtype][index]]
    elif rtype == "worker":
        ps = cluster.get("ps")
        worker[str(index)] = cluster[rtype][index]
    return {"worker": worker, "ps": ps}


def _go_json(document: dict[str, Any]) -> str:
    """Encode like Go's encoding/json: compact, and <, >, & escaped as \\u003c etc."""
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
