"""One scenario run for several kinds at once, each kind in a lane of its own.

The Kueue scenarios hold for every kind the operator serves, and each mostly waits:
for Kueue to admit, for kwok to run pods, for a job to end. Run one kind after another
they cost their waits five or six times over; run side by side, once. A lane is one
kind's own namespace, queues, nodes (tainted so only its pods land there) and
operator; `run_lanes` runs the scenario in every lane at once and fails with every
lane's failure, each under its kind, so a broken kind is named as a parametrized
test would name it.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor


class LanesFailed(AssertionError):
    """The scenario failed in at least one lane; the message has each one's traceback."""


def run_lanes(runs: Mapping[str, Callable[[], None]], details: Callable[[str], str]) -> None:
    """Run every lane's scenario at once (threads: the lanes wait, they do not
    compute); raise LanesFailed naming each lane that failed, with its traceback and
    what `details` says about that lane (an operator's log, say)."""
    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="lane") as pool:
        futures = {name: pool.submit(run) for name, run in runs.items()}
    failures = {name: f.exception() for name, f in futures.items() if f.exception() is not None}
    if not failures:
        return
    parts = []
    for name, error in failures.items():
        assert error is not None
        trace = "".join(traceback.format_exception(error))
        parts.append(f"===== {name} =====\n{trace}{details(name)}")
    summary = ", ".join(f"{name}: {type(e).__name__}: {e}" for name, e in failures.items())
    raise LanesFailed(f"failed in {len(failures)} of {len(runs)} lanes ({summary[:2000]})\n\n"
                      + "\n".join(parts))  # fmt: skip
