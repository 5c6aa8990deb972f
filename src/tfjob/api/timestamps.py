"""Timestamps as Kubernetes writes them: RFC 3339 in UTC, ending in "Z".

Object times (creationTimestamp, startTime, conditions, events) have whole seconds
(metav1.Time); a few fields, such as a Lease's renewTime, have microseconds
(metav1.MicroTime). Every runtime and the core format and read times here, so a
time written by one is read back the same by another.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """`moment` (timezone-aware) in UTC, to the second: 2026-01-02T03:04:05Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: datetime) -> str:
    """`moment` (timezone-aware) in UTC, to the microsecond: 2026-01-02T03:04:05.000006Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> datetime:
    """A timestamp written by `rfc3339`, `rfc3339_micro` or the API server (aware, UTC)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
