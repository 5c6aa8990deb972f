"""What tests and benchmarks both need, written once: a free port, TFJob and PyTorchJob
manifests, and waiting for a condition (polling, in a thread or on the event loop).

Manifests here are plain dicts as a user writes them (for an API server or a YAML
file); `testkit.builders` has the decoded `TFJob` structs the core's tests use.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

IMAGE = "registry.example/tf:2.16"

T = TypeVar("T")


#: Where `free_port` picks: below Linux's default ephemeral range (32768-60999), from
#: which the kernel takes the local port of every outgoing connection. A port picked
#: there could be taken by any process's connection before the server given it binds
#: (a test's operator then exits "address already in use"); below it, only another
#: server binding it explicitly can.
PORT_RANGE = (20000, 32768)
_HANDED_OUT: set[int] = set()  # never the same port twice in one process


def free_port() -> int:
    """A port nothing listens on or holds, below the ephemeral range, not handed out
    before by this process; a caller that can lose the race retries."""
    for _ in range(1000):
        port = random.randrange(*PORT_RANGE)
        if port not in _HANDED_OUT and bindable(port):
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE} after 1000 tries")


def bindable(port: int, *, reuse_address: bool = False) -> bool:
    """Whether a server could listen on 127.0.0.1:`port` now; `reuse_address` as Go's
    servers listen (SO_REUSEADDR: a port its last server left in TIME_WAIT is free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def container(
    image: str = IMAGE, command: list[str] | None = None, *, name: str = "tensorflow"
) -> dict[str, Any]:
    """The training container (`name`: the kind's container name, TFJob's by default)."""
    out: dict[str, Any] = {"name": name, "image": image}
    if command is not None:
        out["command"] = command
    return out


def replica(
    replicas: int = 1,
    restart_policy: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A replica spec: `replicas` pods of `containers` (default: one `container()`);
    `labels`/`annotations` go on the pod template."""
    template: dict[str, Any] = {"spec": {"containers": containers or [container()]}}
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if metadata:
        template["metadata"] = metadata
    spec: dict[str, Any] = {"replicas": replicas, "template": template}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def tfjob(
    name: str, namespace: str | None = None, specs: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A TFJob manifest; `specs` maps replica types to `replica()`s (default: one
    Worker), `spec` adds the rest of its spec (runPolicy=..., successPolicy=...);
    no namespace leaves it to whoever submits the job."""
    return job_manifest("TFJob", "tfReplicaSpecs", name, namespace, specs, **spec)


def job_manifest(
    kind: str,
    spec_field: str,
    name: str,
    namespace: str | None = None,
    specs: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A kubeflow.org/v1 job of `kind` whose replica specs are under `spec_field`
    (`tfjob()` for TFJob's); `specs` default: one Worker."""
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": {spec_field: {"Worker": replica()} if specs is None else specs, **spec},
    }


def pytorchjob(
    name: str, namespace: str | None = None, specs: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A PyTorchJob manifest, as `tfjob()` a TFJob: `specs` maps replica types to
    replica specs whose container is named `pytorch` (default: one Worker)."""
    worker = replica(containers=[{"name": "pytorch", "image": IMAGE}])
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {"pytorchReplicaSpecs": {"Worker": worker} if specs is None else specs, **spec},
    }


class WaitTimeout(AssertionError):
    """`wait_for` ran out of time (a test failure; callers that re-word it catch only
    this, so an assertion raised while polling is not taken for a timeout)."""


def wait_for(
    what: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05, message: str = ""
) -> T:
    """Poll `what` until it returns neither None nor False (an empty dict counts: "no
    pods left" is an answer); fail with `message` when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = what()
        if last is not None and last is not False:
            return last
        time.sleep(interval)
    raise WaitTimeout(f"timed out after {timeout} s waiting for {message or what}; last: {last!r}")


async def until(
    condition: Callable[[], object], within: float = 10.0, interval: float = 0.01
) -> None:
    """`wait_for` on the event loop: poll `condition` until it is true, letting other
    tasks run; TimeoutError after `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise TimeoutError(f"condition not met within {within} s")
        await asyncio.sleep(interval)
