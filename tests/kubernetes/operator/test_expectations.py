"""Expectations: a job waits for its own writes to show up in the cache."""

from __future__ import annotations

from tfjob.runtimes.kubernetes.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_job_with_nothing_pending_may_be_reconciled() -> None:
    assert Expectations().satisfied("ns/j")


def test_creates_block_until_every_one_is_observed() -> None:
    exp = Expectations()
    for name in ("j-worker-0", "j-worker-1"):
        exp.expect_create("ns/j", "pods", name)
    exp.expect_create("ns/j", "services", "j-worker-0")
    exp.created("ns/j", "pods", "j-worker-0")
    exp.created("ns/j", "pods", "j-worker-1")
    assert not exp.satisfied("ns/j")  # all, not any: the service is still unseen
    exp.created("ns/j", "services", "j-worker-0")
    assert exp.satisfied("ns/j")


def test_seeing_one_deletion_twice_does_not_cover_another() -> None:
    exp = Expectations()
    exp.expect_delete("ns/j", "pods", "j-worker-0")
    exp.expect_delete("ns/j", "pods", "j-worker-1")
    exp.deleted("ns/j", "pods", "j-worker-0")  # deletionTimestamp seen
    exp.deleted("ns/j", "pods", "j-worker-0")  # then the DELETED event
    assert not exp.satisfied("ns/j")
    assert exp.pending("ns/j") == 1
    exp.deleted("ns/j", "pods", "j-worker-1")
    assert exp.satisfied("ns/j")


def test_jobs_are_independent() -> None:
    exp = Expectations()
    exp.expect_create("ns/a", "pods", "a-worker-0")
    assert exp.satisfied("ns/b")
    exp.created("ns/b", "pods", "a-worker-0")  # same name, other job: no effect on a
    assert not exp.satisfied("ns/a")


def test_pending_operations_expire_after_five_minutes() -> None:
    clock = Clock()
    exp = Expectations(clock=clock)
    exp.expect_create("ns/j", "pods", "j-worker-0")
    clock.now += 299
    assert not exp.satisfied("ns/j")
    assert 0.9 < exp.time_left("ns/j") <= 1.0
    clock.now += 1
    assert exp.satisfied("ns/j")
    assert exp.pending("ns/j") == 0  # and the stale entry is gone


def test_forgetting_a_deleted_job_drops_its_expectations() -> None:
    exp = Expectations()
    exp.expect_delete("ns/j", "services", "j-ps-0")
    exp.forget("ns/j")
    assert exp.satisfied("ns/j")
