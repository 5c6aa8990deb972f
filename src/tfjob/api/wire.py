"""The base of every struct that mirrors a Kubernetes object as JSON.

The job types (types.py, and each kind's in its framework) and the projections of pods
and services (observed.py) share one wire convention: camelCase names, and fields at
their default left out when encoding, as the API server itself writes objects.
"""

from __future__ import annotations

import msgspec


class Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base for API structs: camelCase on the wire, defaults left out when encoding."""
