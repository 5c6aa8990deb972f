"""The small translations the cluster commands make: kubectl's durations and ages, log
timestamps with any number of fraction digits, a pod as a row of the live table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
import pytest

from tfjob.interfaces.cluster import Duration, age
from tfjob.interfaces.cluster_client.follow import replica_view, time_key


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0)],
)
def test_durations_are_read_as_kubectl_reads_them(text: str, seconds: float) -> None:
    assert Duration().convert(text, None, None) == seconds


@pytest.mark.parametrize("text", ["90", "5 m", "m", "1d", "-5s", "5s5"])
def test_other_durations_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(click.BadParameter, match=r"write e\.g\. 90s, 5m or 1h30m"):
        Duration().convert(text, None, None)


@pytest.mark.parametrize(
    ("ago", "shown"),
    [
        (timedelta(seconds=42), "42s"),
        (timedelta(minutes=3, seconds=12), "3m12s"),
        (timedelta(minutes=45), "45m"),
        (timedelta(hours=5, minutes=20), "5h20m"),
        (timedelta(hours=30), "30h"),
        (timedelta(days=3, hours=4), "3d4h"),
        (timedelta(days=40), "40d"),
    ],
)
def test_ages_read_like_kubectls(ago: timedelta, shown: str) -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    created = (now - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert age(created, now) == shown


def test_log_timestamps_order_whatever_their_precision() -> None:
    stamps = [
        "2026-12-01T06:00:00Z",
        "2026-12-01T06:00:00.000000001Z",
        "2026-12-01T06:00:00.1Z",
        "2026-12-01T06:00:00.123456789Z",
        "2026-12-01T06:00:01.05Z",
    ]
    assert sorted(stamps, key=time_key) == stamps
    assert time_key("2026-12-01T06:00:00.1Z") == time_key("2026-12-01T06:00:00.100Z")


def test_a_pod_becomes_a_row_of_the_live_table() -> None:
    pod = {
        "metadata": {
            "name": "job-worker-1",
            "deletionTimestamp": "2026-12-01T06:00:09Z",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "1",
            },
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-12-01T06:00:00Z",
            "containerStatuses": [
                {"name": "tensorflow", "restartCount": 2},
                {"name": "sidecar", "restartCount": 1},
            ],
        },
    }
    view = replica_view(pod)
    assert (view.replica, view.pod_name, view.phase, view.restarts) == (
        "worker-1",
        "job-worker-1",
        "Running",
        3,
    )
    assert view.terminating
    assert view.started_at == datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    fresh = replica_view({"metadata": {"name": "p"}})
    assert (fresh.replica, fresh.phase, fresh.restarts, fresh.started_at) == (
        "p",
        "Pending",
        0,
        None,
    )
