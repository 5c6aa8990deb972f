"""How long to wait before trying again: the one backoff of the Kubernetes runtime.

Every retry here doubles its wait from a first delay up to a cap (client-go's
exponential backoff); what differs is only whose failures are counted:
- `Backoff`: one sequence of retries (an informer reconnecting, the event writer),
  optionally stretched by random jitter so many clients retrying at once after an
  API server restart do not arrive together;
- `ExponentialBackoff`: failures counted per work-queue key, so one failing job
  backs off without slowing the others (client-go's per-item rate limiter).
"""

from __future__ import annotations

import random

MAX_DOUBLINGS = 64  # 2**64 times any first delay exceeds every cap: stop the float growing


def exponential(failures: int, first: float, cap: float) -> float:
    """The wait after `failures` earlier failures: first * 2**failures, at most `cap`."""
    if failures > MAX_DOUBLINGS:
        return cap
    return min(first * 2.0**failures, cap)


class Backoff:
    """One sequence of retries: waits doubling from `first` to `cap`, each stretched by
    up to `jitter` (0.5: up to 50% longer); `reset` after a success."""

    def __init__(self, first: float, cap: float, *, jitter: float = 0.0) -> None:
        self.first = first
        self.cap = cap
        self.jitter = jitter
        self.failures = 0
        self._rng = random.Random()

    def delay(self) -> float:
        """The wait before the next try, counting this failure."""
        wait = exponential(self.failures, self.first, self.cap)
        self.failures += 1
        return wait * (1 + self.jitter * self._rng.random()) if self.jitter else wait

    def reset(self) -> None:
        self.failures = 0


class ExponentialBackoff:
    """Per-key failure delays: first * 2**failures, capped (client-go's item limiter)."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self._base = base
        self._cap = cap
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        """The delay before the next retry of `key`, counting this failure."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return exponential(failures, self._base, self._cap)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)
