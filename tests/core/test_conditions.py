"""The condition state machine (the cases of upstream's TestUpdateJobConditions)."""

from __future__ import annotations

from tfjob.api.types import JobStatus
from tfjob.core.conditions import set_condition

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def kinds(status: JobStatus) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in status.conditions]


def test_same_type_status_and_reason_changes_nothing_not_even_the_message() -> None:
    status = JobStatus()
    assert set_condition(status, "Running", "True", "R", "one", T0)
    assert not set_condition(status, "Running", "True", "R", "two", T1)
    assert status.conditions[0].message == "one"
    assert status.conditions[0].last_update_time == T0


def test_new_reason_moves_to_the_end_and_keeps_transition_time() -> None:
    status = JobStatus()
    set_condition(status, "Created", "True", "C", "", T0)
    set_condition(status, "Suspended", "True", "S", "", T0)
    set_condition(status, "Created", "True", "C2", "", T1)
    assert kinds(status) == [("Suspended", "True", "S"), ("Created", "True", "C2")]
    assert status.conditions[-1].last_transition_time == T0
    assert status.conditions[-1].last_update_time == T1


def test_running_and_restarting_replace_each_other() -> None:
    status = JobStatus()
    set_condition(status, "Running", "True", "R", "", T0)
    set_condition(status, "Restarting", "True", "X", "", T0)
    assert kinds(status) == [("Restarting", "True", "X")]
    set_condition(status, "Running", "True", "R", "", T1)
    assert kinds(status) == [("Running", "True", "R")]


def test_terminal_conditions_flip_running_to_false_keeping_its_timestamps() -> None:
    status = JobStatus()
    set_condition(status, "Running", "True", "R", "m", T0)
    set_condition(status, "Succeeded", "True", "S", "", T1)
    assert kinds(status) == [("Running", "False", "R"), ("Succeeded", "True", "S")]
    assert status.conditions[0].last_transition_time == T0


def test_failed_is_sticky_and_exclusive() -> None:
    status = JobStatus()
    set_condition(status, "Failed", "True", "F", "", T0)
    assert not set_condition(status, "Running", "True", "R", "", T1)
    assert not set_condition(status, "Succeeded", "True", "S", "", T1)
    assert kinds(status) == [("Failed", "True", "F")]


def test_succeeded_is_sticky_too() -> None:
    status = JobStatus()
    set_condition(status, "Succeeded", "True", "S", "", T0)
    assert not set_condition(status, "Failed", "True", "F", "", T1)
    assert kinds(status) == [("Succeeded", "True", "S")]
