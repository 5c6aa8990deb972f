"""The runtime's one backoff: waits double from the first delay to the cap; jitter only
ever lengthens a wait (up to its fraction); a success starts again from the first."""

from __future__ import annotations

from tfjob.runtimes.kubernetes.cache.backoff import Backoff, exponential


def test_waits_double_up_to_the_cap_and_start_again_after_a_reset() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.delay() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.delay() == 0.1


def test_jitter_stretches_each_wait_by_at_most_its_fraction() -> None:
    backoff = Backoff(0.8, 30.0, jitter=1.0)
    waits = [backoff.delay() for _ in range(8)]
    plain = [exponential(n, 0.8, 30.0) for n in range(8)]
    assert all(p <= w <= 2 * p for w, p in zip(waits, plain, strict=True))
    assert waits != plain  # stretched (8 draws of 0.0 in a row: never in practice)


def test_many_failures_stay_at_the_cap() -> None:
    assert exponential(10_000, 0.005, 1000.0) == 1000.0
