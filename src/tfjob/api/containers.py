"""The training container of a pod: the one named "tensorflow".

A replica's pod may have several containers (sidecars, log shippers); tfjob gives only
the one named "tensorflow" its TF_CONFIG and default port, reads its port for the
cluster's addresses, and judges the replica by its exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfjob.api import constants as c


def tensorflow_container(pod_spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The container named "tensorflow" in a pod spec (a template's or a pod's), or
    None. The container itself is returned, so a caller may change it in place."""
    for container in (pod_spec or {}).get("containers") or []:
        if isinstance(container, dict) and container.get("name") == c.DEFAULT_CONTAINER_NAME:
            return container
    return None
