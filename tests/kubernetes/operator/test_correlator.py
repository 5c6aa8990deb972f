"""The event correlator keeps a reconcile loop from flooding the API with Events."""

from __future__ import annotations

from tfjob.runtimes.kubernetes.events import (
    COMBINED_PREFIX,
    Bump,
    Correlator,
    Create,
    ObjectRef,
    Record,
)

JOB = ObjectRef(namespace="ns", name="j", uid="uid-1")
OTHER = ObjectRef(namespace="ns", name="k", uid="uid-2")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(message: str = "Pod: ns.j-worker-0 exited with code 1", ref: ObjectRef = JOB) -> Record:
    return Record(ref, "Normal", "ExitedWithCode", message)


def test_an_identical_event_bumps_the_count_of_the_first() -> None:
    correlator = Correlator(Clock())
    first = correlator.decide(_record())
    assert isinstance(first, Create)
    correlator.written(first.key)
    second = correlator.decide(_record())
    third = correlator.decide(_record())
    assert isinstance(second, Bump) and second.count == 2 and second.key == first.key
    assert isinstance(third, Bump) and third.count == 3


def test_more_than_ten_similar_events_are_combined_into_one() -> None:
    correlator = Correlator(Clock())
    decisions = []
    for i in range(14):
        decision = correlator.decide(
            Record(JOB, "Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}")
        )
        assert decision is not None
        if isinstance(decision, Create):
            correlator.written(decision.key)
        decisions.append(decision)
    assert all(isinstance(d, Create) for d in decisions[:10])
    assert all(not d.record.message.startswith(COMBINED_PREFIX) for d in decisions[:10])
    combined = decisions[10:]
    assert isinstance(combined[0], Create)
    assert combined[0].record.message == COMBINED_PREFIX + "Created pod: j-worker-10"
    assert [d.count for d in combined[1:] if isinstance(d, Bump)] == [2, 3, 4]


def test_each_object_gets_a_burst_then_one_event_per_five_minutes() -> None:
    clock = Clock()
    correlator = Correlator(clock)
    allowed = [correlator.decide(_record()) is not None for _ in range(30)]
    assert allowed.count(True) == 25 and allowed[25:] == [False] * 5
    assert correlator.decide(_record(ref=OTHER)) is not None  # per object
    clock.now += 300
    assert correlator.decide(_record()) is not None
    assert correlator.decide(_record()) is None


def test_forgetting_a_deleted_job_resets_its_budget() -> None:
    correlator = Correlator(Clock())
    for _ in range(25):
        correlator.decide(_record())
    assert correlator.decide(_record()) is None
    correlator.forget_object("uid-1")
    assert isinstance(correlator.decide(_record()), Create)
