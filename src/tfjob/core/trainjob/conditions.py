"""TrainJob conditions, set as apimachinery's meta.SetStatusCondition sets them.

A new condition is appended with its own lastTransitionTime, or `now` when it has
none; an existing one of the same type takes the new reason, message and
observedGeneration, and a new lastTransitionTime only when its status changes.
"""

from __future__ import annotations

from tfjob.api.trainjob import Condition


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    *,
    transition: str | None = None,
    observed_generation: int | None = None,
) -> list[Condition]:
    """`conditions` with this one set (a new list; the conditions are immutable)."""
    changed = transition or now
    result = []
    found = False
    for cond in conditions:
        if cond.type != type_:
            result.append(cond)
            continue
        found = True
        result.append(
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=cond.last_transition_time
                if cond.status == status
                else changed,
                observed_generation=observed_generation,
            )
        )
    if not found:
        result.append(
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=changed,
                observed_generation=observed_generation,
            )
        )
    return result


def remove_condition(conditions: list[Condition], type_: str) -> list[Condition]:
    return [c for c in conditions if c.type != type_]
