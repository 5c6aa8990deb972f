"""TF_CONFIG: how TensorFlow processes find each other.

The JSON must be byte-identical to upstream's Go `encoding/json` output for the same
job: compact separators, cluster keys sorted, field order cluster/task/environment
(standard) or cluster{worker, ps}/task (sparse, for enableDynamicWorker).
"""

from __future__ import annotations

import json
from typing import Any

from tfjob.api import constants as c
from tfjob.api.containers import tensorflow_container
from tfjob.api.names import object_name, replica_key
from tfjob.api.types import ReplicaSpec, TFJob
from tfjob.core.settings import Settings


def is_distributed(job: TFJob) -> bool:
    """True unless the known replica types add up to exactly one replica (a job of one
    replica gets no TF_CONFIG, as upstream)."""
    total = 0
    for key, spec in job.spec.tf_replica_specs.items():
        if key in c.REPLICA_TYPES:
            total += 1 if spec.replicas is None else spec.replicas
    return total != 1


def replica_port(spec: ReplicaSpec) -> int:
    """The `tfjob-port` of the tensorflow container, or 2222."""
    container = tensorflow_container(spec.template.get("spec")) or {}
    for port in container.get("ports") or []:
        if port.get("name") == c.DEFAULT_PORT_NAME:
            return int(port["containerPort"])
    return c.DEFAULT_PORT


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
