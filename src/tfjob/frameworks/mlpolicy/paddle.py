"""paddle (a runtime labelled `trainer.kubeflow.org/framework: paddle`, with no mlPolicy
source): every container of every Paddle pod gets the PaddleJob's env.

The trainer step (`node`) is the Workers; a job named `master` is the Masters
(parameter-server mode), else the mode is collective. The env is the PaddleJob
framework's own (`frameworks.paddle`: PYTHONUNBUFFERED, PADDLE_JOB_ID, PADDLE_NNODES,
PADDLE_MASTER, and in parameter-server mode PADDLE_SERVER_NUM or PADDLE_TRAINER_NUM),
with the rendezvous at its JobSet host name, `<tj>-<job>-0-0.<tj>:<port>` (the `node`
container's `master` port, else 36543).

One difference, as a job's pods share one template: a PaddleJob gives only its
rendezvous pod `PADDLE_MASTER=$(POD_IP_DUMMY):<port>` (Paddle's launcher starts the
rendezvous server on the pod whose own address is the master's host). Here every pod
gets the host name, and POD_IP (the launcher's own-address setting) is each pod's own
JobSet host name, `<tj>-<job>-0-$(TFJOB_POD_INDEX).<tj>`, the index read through the
downward API: the first pod then finds itself the master, the others do not
(docs/decisions/0034-tensorflow-and-paddle-trainjobs.md).
"""

from __future__ import annotations

from typing import Any

from tfjob.api.names import replica_key
from tfjob.api.types import ObjectMeta, ReplicaSpec
from tfjob.frameworks import paddle as pd
from tfjob.frameworks.framework import EnvVar
from tfjob.frameworks.mlpolicy.base import (
    ANCESTOR_TRAINER,
    NODE,
    NodeBuild,
    PodSet,
    SideParts,
    env_index,
    env_value,
    upsert_env,
    upsert_port,
)
from tfjob.frameworks.mlpolicy.plain import Plain
from tfjob.frameworks.settings import Settings

FRAMEWORK = "paddle"
INDEX_ENV = "TFJOB_POD_INDEX"
OWN_ADDRESS_ENV = "POD_IP"


def replica_type(ps: PodSet) -> str | None:
    """Worker for the trainer step, Master for a job named `master`, else None."""
    if ps.ancestor == ANCESTOR_TRAINER:
        return pd.WORKER
    if ps.ancestor is None and ps.name == replica_key(pd.MASTER):
        return pd.MASTER
    return None


def port_of(ps: PodSet) -> int:
    """The `node` container's `master` port, else 36543 (the PaddleJob's rule)."""
    for port in (ps.container(NODE) or {}).get("ports") or []:
        if port.get("name") == pd.PADDLE.port_name:
            return int(port["containerPort"])
    return pd.PADDLE.port


def host(build: NodeBuild, ps: PodSet, index: str) -> str:
    return f"{build.name}-{ps.name}-0-{index}.{build.name}"


def equivalent_paddlejob(build: NodeBuild, found: list[tuple[PodSet, str]]) -> pd.PaddleJob:
    specs = {rtype: ReplicaSpec(replicas=ps.count) for ps, rtype in found}
    return pd.PaddleJob(
        metadata=ObjectMeta(name=build.name, namespace=build.trainjob.metadata.namespace),
        spec=pd.PaddleJobSpec(paddle_replica_specs=specs),
    )


def pod_env(
    build: NodeBuild, found: list[tuple[PodSet, str]], ps: PodSet, rtype: str
) -> list[EnvVar]:
    """The PaddleJob's env of a pod that is not the rendezvous (index 1 of its type:
    every pod but the rendezvous gets the same), then the pod's own address."""
    addresses = {
        replica_key(t): [f"{host(build, s, str(i))}:{port_of(s)}" for i in range(s.count)]
        for s, t in found
    }
    job = equivalent_paddlejob(build, found)
    env = pd.PADDLE.pod_env(job, Settings(local_addresses=addresses)).for_replica(rtype, 1)
    return [
        *env,
        env_index(INDEX_ENV),
        env_value(OWN_ADDRESS_ENV, host(build, ps, f"$({INDEX_ENV})")),
    ]


class Paddle:
    def enforce(self, build: NodeBuild) -> None:
        Plain().enforce(build)
        found = [(ps, t) for ps in build.pod_sets if (t := replica_type(ps)) is not None]
        for ps, rtype in found:
            env = pod_env(build, found, ps, rtype)
            for container in ps.pod_spec.get("containers") or []:
                upsert_env(container, *(dict(e) for e in env))
            container = ps.container(NODE)
            if container is not None:
                upsert_port(container, {"name": pd.PADDLE.port_name, "containerPort": port_of(ps)})

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        return []
