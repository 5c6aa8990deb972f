"""Services, locally: bookkeeping only.

Replicas reach each other at the 127.0.0.1 addresses in TF_CONFIG, so a headless
service has nothing to do on one machine. The core still plans them (and cleans them
up), so the runtime records which exist and reports them back, as the API server would.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from tfjob.api.observed import Meta, Service


class ServiceBook:
    """The services that "exist" for this run, by name."""

    def __init__(self) -> None:
        self._services: dict[str, Service] = {}

    def create(self, manifest: Mapping[str, Any]) -> bool:
        """Record a service; False if one of that name exists already."""
        meta = msgspec.convert(manifest.get("metadata", {}), Meta)
        if meta.name in self._services:
            return False
        meta = msgspec.structs.replace(meta, uid=str(uuid.uuid4()))
        self._services[meta.name] = Service(metadata=meta)
        return True

    def delete(self, name: str) -> bool:
        """Forget a service; False if there was none of that name."""
        return self._services.pop(name, None) is not None

    def list(self) -> list[Service]:
        return list(self._services.values())
