"""The adaptive limit: it follows how long requests take, not a number someone guessed."""

from __future__ import annotations

from app.admission.limit import AdaptiveLimit


def feed(limit: AdaptiveLimit, seconds: float, in_flight: int | None, start: float, windows: int) -> float:
    """``windows`` windows of requests taking ``seconds``; ``in_flight`` None: always at the limit."""
    now = start
    for _ in range(windows):
        for _ in range(10):
            limit.sample("search", seconds, limit.current if in_flight is None else in_flight, now)
            now += limit.window_seconds / 10
    return now


def test_requests_as_fast_as_ever_at_the_limit_raise_it() -> None:
    limit = AdaptiveLimit(initial=4, minimum=2, maximum=10)
    now = feed(limit, 0.01, in_flight=4, start=0.0, windows=1)
    feed(limit, 0.01, in_flight=None, start=now, windows=20)
    assert limit.current == 10  # and never past the maximum


def test_requests_below_the_limit_do_not_raise_it() -> None:
    limit = AdaptiveLimit(initial=4, minimum=2, maximum=10)
    feed(limit, 0.01, in_flight=1, start=0.0, windows=20)
    assert limit.current == 4


def test_requests_taking_far_longer_than_their_fastest_lower_it_to_the_minimum_at_most() -> None:
    limit = AdaptiveLimit(initial=8, minimum=2, maximum=10, tolerance=2.0)
    now = feed(limit, 0.01, in_flight=8, start=0.0, windows=1)
    feed(limit, 0.05, in_flight=8, start=now, windows=40)
    assert limit.current == 2


def test_each_kind_is_compared_with_its_own_fastest() -> None:
    limit = AdaptiveLimit(initial=4, minimum=2, maximum=10, tolerance=2.0)
    now = 0.0
    for _ in range(20):  # adds are always ten times slower than searches: that is no overload
        for _ in range(5):
            limit.sample("search", 0.01, 4, now)
            limit.sample("add", 0.1, 4, now)
            now += limit.window_seconds / 10
    assert limit.current > 4


def test_a_machine_that_became_slower_for_good_is_learned_again() -> None:
    limit = AdaptiveLimit(initial=4, minimum=2, maximum=10, tolerance=2.0, drift_per_second=0.5)
    now = feed(limit, 0.01, in_flight=4, start=0.0, windows=1)
    now = feed(limit, 0.05, in_flight=4, start=now, windows=60)  # shrinks first, then the baseline catches up
    low = limit.current
    feed(limit, 0.05, in_flight=None, start=now, windows=20)
    assert limit.current > low


def test_by_default_two_requests_sharing_the_cores_keep_it_and_three_times_the_fastest_lowers_it() -> None:
    """A lone request embeds on every core, so two sharing a 2-core box take 1.5-1.8 times as long without any
    queueing inside: the default tolerance (2.0) keeps that limit. Three times as slow is queueing for the cores."""
    shared = AdaptiveLimit(initial=8, minimum=2, maximum=10)
    now = feed(shared, 0.01, in_flight=8, start=0.0, windows=1)
    feed(shared, 0.0175, in_flight=8, start=now, windows=10)
    assert shared.current >= 8
    queued = AdaptiveLimit(initial=8, minimum=2, maximum=10)
    now = feed(queued, 0.01, in_flight=8, start=0.0, windows=1)
    feed(queued, 0.03, in_flight=8, start=now, windows=10)
    assert queued.current < 8
    strict = AdaptiveLimit(initial=8, minimum=2, maximum=10, tolerance=1.2)
    now = feed(strict, 0.01, in_flight=8, start=0.0, windows=1)
    feed(strict, 0.015, in_flight=8, start=now, windows=10)
    assert strict.current < 8
