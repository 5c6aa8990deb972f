"""Timestamps written as Kubernetes writes them, and read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from tfjob.api.timestamps import parse_rfc3339, rfc3339, rfc3339_micro

MOMENT = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)


def test_seconds_in_utc_whatever_the_zone_given() -> None:
    east = MOMENT.astimezone(timezone(timedelta(hours=5)))
    assert rfc3339(east) == "2026-01-02T03:04:05Z"


def test_microseconds_for_micro_time() -> None:
    assert rfc3339_micro(MOMENT) == "2026-01-02T03:04:05.000006Z"


def test_what_is_written_reads_back() -> None:
    assert parse_rfc3339(rfc3339_micro(MOMENT)) == MOMENT
    assert parse_rfc3339(rfc3339(MOMENT)) == MOMENT.replace(microsecond=0)
