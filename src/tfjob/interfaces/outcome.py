"""A finished job's exit status, the same for `tfjob run` and the cluster commands:
0 Succeeded (a TrainJob: Complete), 1 Failed (its reason on stderr) or ended without
succeeding."""

from __future__ import annotations

import click

from tfjob.api import constants as c
from tfjob.api.types import JobCondition

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1


def exit_status(name: str, conditions: list[JobCondition], *, success: str = c.SUCCEEDED) -> int:
    """`success`: the condition type of the job's kind that says it went well."""
    failed = true_condition(conditions, c.FAILED)
    if failed is not None:
        reason = f"reason {failed.reason}" if failed.reason else ""
        why = "; ".join(x for x in (failed.message, reason) if x)
        click.echo(f"tfjob: {name} failed: {why}", err=True)
        return EXIT_FAILED
    if true_condition(conditions, success) is None:
        click.echo(f"tfjob: {name} ended without succeeding", err=True)
        return EXIT_FAILED
    return EXIT_SUCCEEDED


def true_condition(conditions: list[JobCondition], condition_type: str) -> JobCondition | None:
    return next((k for k in conditions if k.type == condition_type and k.status == "True"), None)
