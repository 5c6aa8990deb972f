"""Local addresses for the replicas: one free TCP port on 127.0.0.1 each.

On Kubernetes every replica has its own host name and can use its kind's port (2222,
23456); on one machine they must differ. The ports are chosen once, before the first
reconcile, and handed to the core (`Settings.local_addresses`), where the job's
framework puts them in the env in place of service names (TF_CONFIG's cluster;
PyTorchJob's MASTER_ADDR/MASTER_PORT and rendezvous endpoint); the kubelet passes each
replica its own as TFJOB_PORT. A recreated replica keeps its port, so the addresses
its peers already hold stay right.
"""

from __future__ import annotations

import contextlib
import socket

from tfjob.api.names import replica_key
from tfjob.api.types import Job
from tfjob.frameworks.registry import with_defaults

HOST = "127.0.0.1"


def pick_addresses(job: Job) -> dict[str, list[str]]:
    """`host:port` per replica, by lower-case type, in index order.

    All sockets are held open until every port is chosen, so the ports are distinct;
    another program could still take one before the replica binds it (unlikely: the
    kernel hands out ephemeral ports in turn).
    """
    counts = {
        replica_key(key): max(spec.replicas or 0, 0)
        for key, spec in with_defaults(job).spec.replica_specs.items()
    }
    with contextlib.ExitStack() as stack:
        ports = [_bind(stack) for _ in range(sum(counts.values()))]
    addresses: dict[str, list[str]] = {}
    for key, count in counts.items():
        addresses[key] = [f"{HOST}:{ports.pop(0)}" for _ in range(count)]
    return addresses


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (all held open until every one is
    chosen), for pods that are not a v1 job's replicas (a TrainJob's JobSet)."""
    with contextlib.ExitStack() as stack:
        return [_bind(stack) for _ in range(count)]


def port_of(addresses: dict[str, list[str]], key: str, index: int) -> int | None:
    """The port chosen for replica `key`/`index`, if any."""
    chosen = addresses.get(key, [])
    return int(chosen[index].rsplit(":", 1)[1]) if 0 <= index < len(chosen) else None


def _bind(stack: contextlib.ExitStack) -> int:
    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.bind((HOST, 0))
    return int(sock.getsockname()[1])
