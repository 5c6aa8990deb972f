"""The training container of a pod: the one with the kind's default name.

A replica's pod may have several containers (sidecars, log shippers); tfjob gives the
one named as the kind says (`tensorflow`, `pytorch`, ...) its default port, reads its
port for the job's addresses, and judges the replica by its exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfjob.api import constants as c


def named_container(pod_spec: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The container called `name` in a pod spec (a template's or a pod's), or None.
    The container itself is returned, so a caller may change it in place."""
    for container in (pod_spec or {}).get("containers") or []:
        if isinstance(container, dict) and container.get("name") == name:
            return container
    return None


def tensorflow_container(pod_spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A TFJob's training container: the one named "tensorflow", or None."""
    return named_container(pod_spec, c.DEFAULT_CONTAINER_NAME)


def container_port(
    pod_spec: Mapping[str, Any] | None, container: str, port_name: str
) -> int | None:
    """The number of the port called `port_name` on the container called `container`."""
    for port in (named_container(pod_spec, container) or {}).get("ports") or []:
        if isinstance(port, dict) and port.get("name") == port_name:
            return int(port["containerPort"])
    return None
