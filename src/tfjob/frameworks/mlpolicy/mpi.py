"""mpi: the ssh key Secret and hostfile ConfigMap, their volumes, and the launcher's
OpenMPI env.

Node and launcher pods mount Secret `<tj>-mpi-ssh-auth` (an ECDSA P-521 key pair,
made once, immutable) at `sshAuthMountPath`; the launcher also mounts ConfigMap
`<tj>-mpi-hostfile` at /etc/mpi and gets `OMPI_MCA_*` (the hostfile, FQDN host
names, the slots a node has, ssh retries). The hostfile lists every node pod,
`<tj>-node-0-N.<tj> slots=S`, and the launcher's too with `runLauncherAsNode`
(deepspeed, mlx), where the node job has one pod fewer than numNodes.

The key pair is an input (`base.KeyPair`, re-exported here): the shell generates it,
as it reads the clock, so this module stays pure; without one, while the Secret is
still to be made, the build stops with `KeyPairNeeded`.
"""

from __future__ import annotations

import base64
from typing import Any

from tfjob.api.training_runtime import MPIPolicy
from tfjob.frameworks.mlpolicy.base import (
    LAUNCHER,
    NODE,
    KeyPair,
    KeyPairNeeded,
    MLPolicyError,
    NodeBuild,
    PodSet,
    SideParts,
    env_value,
    gpus_per_node,
    upsert_env,
    upsert_mount,
    upsert_volume,
)

SECRET_SUFFIX = "-mpi-ssh-auth"
HOSTFILE_SUFFIX = "-mpi-hostfile"
__all__ = ["MPI", "KeyPair", "KeyPairNeeded"]
SSH_VOLUME = "mpi-ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE = "hostfile"
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"


def policy_of(build: NodeBuild) -> MPIPolicy:
    assert build.policy.mpi is not None
    return build.policy.mpi


def slots(build: NodeBuild) -> int:
    """numProcPerNode from the TrainJob, else the runtime's; a runtime's 1 becomes the
    GPUs a node has when it has more than one."""
    trainer = build.trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node is not None:
        return trainer.num_proc_per_node
    policy = policy_of(build)
    gpus = gpus_per_node(build.resources_per_node)
    return gpus if policy.slots == 1 and gpus > 1 else policy.slots


class MPI:
    def enforce(self, build: NodeBuild) -> None:
        policy = policy_of(build)
        trainer = build.trainjob.spec.trainer
        node = build.by_name(NODE)
        if trainer is not None and trainer.num_nodes is not None and node is not None:
            # With the launcher as a node, the node job has the other numNodes - 1.
            n = trainer.num_nodes
            node.count = max(n - 1, 1) if policy.launcher_as_node else n
        for ps in build.pod_sets:
            if ps.name in (NODE, LAUNCHER):
                self._mount(build, ps, policy)

    def _mount(self, build: NodeBuild, ps: PodSet, policy: MPIPolicy) -> None:
        upsert_volume(ps.pod_spec, _ssh_volume(build.name))
        if ps.name == LAUNCHER:
            upsert_volume(ps.pod_spec, _hostfile_volume(build.name))
        for container in ps.pod_spec.get("containers") or []:
            if container.get("name") != NODE:
                continue
            upsert_mount(container, {"name": SSH_VOLUME, "mountPath": policy.mount_path})
            if ps.name != LAUNCHER:
                continue
            upsert_mount(container, {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR})
            if policy.implementation != "OpenMPI":
                raise MLPolicyError(
                    f"MPI implementation for {policy.implementation} doesn't supported"
                )
            upsert_env(
                container,
                env_value("OMPI_MCA_orte_default_hostfile", f"{HOSTFILE_DIR}/{HOSTFILE}"),
                env_value("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                env_value("OMPI_MCA_orte_set_default_slots", str(slots(build))),
                env_value("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
            )

    def objects(
        self, build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
    ) -> list[dict[str, Any]]:
        """The Secret (only while none exists: it is immutable) and the hostfile."""
        objects: list[dict[str, Any]] = []
        if not parts.secret_exists:
            if parts.key_pair is None:
                raise KeyPairNeeded
            objects.append(_secret(build, parts, parts.key_pair))
        objects.append(_hostfile(build, endpoints, parts))
        return objects


def _ssh_volume(name: str) -> dict[str, Any]:
    return {
        "name": SSH_VOLUME,
        "secret": {
            "secretName": f"{name}{SECRET_SUFFIX}",
            "defaultMode": 0o400,
            "items": [
                {"key": PRIVATE_KEY, "path": "id_rsa", "mode": 0o640},
                {"key": PUBLIC_KEY, "path": "id_rsa.pub", "mode": 0o644},
                {"key": PUBLIC_KEY, "path": "authorized_keys", "mode": 0o644},
            ],
        },
    }


def _hostfile_volume(name: str) -> dict[str, Any]:
    return {
        "name": HOSTFILE_VOLUME,
        "configMap": {
            "name": f"{name}{HOSTFILE_SUFFIX}",
            "items": [{"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444}],
        },
    }


def _secret(build: NodeBuild, parts: SideParts, keys: KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{build.name}{SECRET_SUFFIX}",
            "namespace": build.trainjob.metadata.namespace,
            "ownerReferences": [parts.owner],
        },
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {
            PRIVATE_KEY: base64.b64encode(keys.private_pem).decode(),
            PUBLIC_KEY: base64.b64encode(keys.public_authorized_key).decode(),
        },
    }


def _hostfile(
    build: NodeBuild, endpoints: dict[str, list[str]], parts: SideParts
) -> dict[str, Any]:
    as_node = policy_of(build).launcher_as_node
    per_node = slots(build)
    lines = [
        f"{endpoint} slots={per_node}\n"
        for ps in build.pod_sets
        if ps.name == NODE or (as_node and ps.name == LAUNCHER)
        for endpoint in endpoints.get(ps.name, [])
    ]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{build.name}{HOSTFILE_SUFFIX}",
            "namespace": build.trainjob.metadata.namespace,
            "ownerReferences": [parts.owner],
        },
        "data": {HOSTFILE: "".join(lines)},
    }
