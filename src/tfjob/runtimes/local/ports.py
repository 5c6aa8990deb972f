"""Local addresses for the replicas: one free TCP port on 127.0.0.1 each.

On Kubernetes every replica has its own host name and can use its kind's port (2222,
23456); on one machine they must differ. The ports are chosen once, before the first
reconcile, and handed to the core (`Settings.local_addresses`), where the job's
framework puts them in the env in place of service names (TF_CONFIG's cluster;
PyTorchJob's MASTER_ADDR/MASTER_PORT and rendezvous endpoint); the kubelet passes each
replica its own as TFJOB_PORT. A recreated replica keeps its port, so the addresses
its peers already hold stay right.

The ports are picked below the kernel's ephemeral range, where no connection's own
port is ever taken: a port from that range (what `bind(0)` hands out) is free only
until some process connects from it, and a replica's early peers connect, retry and
hold connections while it starts, so its port could be in use when it binds (and
again after its restart, as it keeps the port).
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

from tfjob.api.names import replica_key
from tfjob.api.types import Job
from tfjob.frameworks.registry import with_defaults

HOST = "127.0.0.1"


def pick_addresses(job: Job) -> dict[str, list[str]]:
    """`host:port` per replica, by lower-case type, in index order.

    All sockets are held open until every port is chosen, so the ports are distinct;
    another program could still listen on one before the replica binds it.
    """
    counts = {
        replica_key(key): max(spec.replicas or 0, 0)
        for key, spec in with_defaults(job).spec.replica_specs.items()
    }
    ports = free_ports(sum(counts.values()))
    addresses: dict[str, list[str]] = {}
    for key, count in counts.items():
        addresses[key] = [f"{HOST}:{ports.pop(0)}" for _ in range(count)]
    return addresses


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (all held open until every one is
    chosen), for pods that are not a v1 job's replicas (a TrainJob's JobSet)."""
    first_ephemeral = _first_ephemeral()
    with contextlib.ExitStack() as stack:
        return [_bind(stack, first_ephemeral) for _ in range(count)]


def port_of(addresses: dict[str, list[str]], key: str, index: int) -> int | None:
    """The port chosen for replica `key`/`index`, if any."""
    chosen = addresses.get(key, [])
    return int(chosen[index].rsplit(":", 1)[1]) if 0 <= index < len(chosen) else None


#: Linux's ephemeral range. Elsewhere it starts at IANA's 49152 (macOS, BSDs,
#: Windows), above every port picked here.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_FIRST_EPHEMERAL = 49152
#: The ports picked from: above the well-known and most registered services' ports,
#: below Kubernetes' NodePorts (30000-32767), whose rules on a node also catch
#: 127.0.0.1, and below the ephemeral range.
LOWEST, HIGHEST = 10000, 30000
#: Candidates tried before falling back to `bind(0)`.
TRIES = 200


def _bind(stack: contextlib.ExitStack, first_ephemeral: int) -> int:
    """A free port held open in `stack`: one of [LOWEST, HIGHEST) below
    `first_ephemeral` if there is room, else one the kernel picks."""
    top = min(HIGHEST, first_ephemeral)
    for _ in range(TRIES if top > LOWEST else 0):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((HOST, random.randrange(LOWEST, top)))
        except OSError:  # in use, or held by this pick already
            sock.close()
            continue
        return int(stack.enter_context(sock).getsockname()[1])
    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.bind((HOST, 0))
    return int(sock.getsockname()[1])


def _first_ephemeral() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except FileNotFoundError:
        return DEFAULT_FIRST_EPHEMERAL
    except (OSError, ValueError, IndexError):
        return 0  # unreadable: let the kernel pick
