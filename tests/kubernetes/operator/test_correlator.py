"""The event correlator folds repeats: similar events combine, identical ones count."""

from __future__ import annotations

from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.runtimes.kubernetes.controller.events import (
    COMBINED_PREFIX,
    Correlator,
    ObjectRef,
    Record,
)

# The job the events are about: a TFJob, reported by its kind's controller.
TFJOB_REF = {
    "kind": TENSORFLOW.kind,
    "api_version": TENSORFLOW.api_version,
    "reporter": TENSORFLOW.controller_name,
}

JOB = ObjectRef(namespace="ns", name="j", uid="uid-1", **TFJOB_REF)
OTHER = ObjectRef(namespace="ns", name="k", uid="uid-2", **TFJOB_REF)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(message: str = "Pod: ns.j-worker-0 exited with code 1", ref: ObjectRef = JOB) -> Record:
    return Record(ref, "Normal", "ExitedWithCode", message)


def test_an_identical_event_has_the_same_key() -> None:
    correlator = Correlator(Clock())
    first, key = correlator.correlate(_record())
    again, same = correlator.correlate(_record())
    assert key == same and again == first
    assert correlator.correlate(_record(ref=OTHER))[1] != key  # per object


def test_more_than_ten_similar_events_are_combined_into_one() -> None:
    correlator = Correlator(Clock())
    results = [
        correlator.correlate(Record(JOB, "Normal", "SuccessfulCreatePod", f"Created pod: j-w-{i}"))
        for i in range(14)
    ]
    assert len({key for _, key in results[:10]}) == 10
    assert all(not r.message.startswith(COMBINED_PREFIX) for r, _ in results[:10])
    combined = results[10:]
    assert len({key for _, key in combined}) == 1
    assert combined[0][0].message == COMBINED_PREFIX + "Created pod: j-w-10"


def test_similar_events_are_combined_only_within_ten_minutes() -> None:
    clock = Clock()
    correlator = Correlator(clock)
    for i in range(11):
        correlator.correlate(_record(f"message {i}"))
    clock.now += 601
    record, _key = correlator.correlate(_record("message 11"))
    assert not record.message.startswith(COMBINED_PREFIX)


def test_forgetting_a_deleted_job_resets_its_aggregation() -> None:
    correlator = Correlator(Clock())
    for i in range(11):
        correlator.correlate(_record(f"message {i}"))
    correlator.forget_object("uid-1")
    record, _key = correlator.correlate(_record("message 12"))
    assert not record.message.startswith(COMBINED_PREFIX)
