"""The hybrid logical clock on its own: never behind what it was asked to follow, whatever the wall clock says."""

from __future__ import annotations

from app.sync import hlc
from app.sync.hlc import LOGICAL_BITS, HybridClock

NOW_MS = 1_790_000_000_000


def frozen(ms: int = NOW_MS) -> HybridClock:
    return HybridClock(now_ms=lambda: ms)


def test_a_tick_after_a_version_is_above_it_even_when_the_wall_clock_is_behind() -> None:
    clock = frozen()
    ahead = (NOW_MS + 60_000) << LOGICAL_BITS  # written on a machine a minute ahead
    assert clock.tick(after=ahead) > ahead
    assert clock.tick(after=ahead) > ahead, "and again, though the clock already stood there"
    # A version with the counter at its last value still orders below the tick that follows it.
    full = (NOW_MS << LOGICAL_BITS) | ((1 << LOGICAL_BITS) - 1)
    assert frozen().tick(after=full) > full


def test_two_ticks_under_a_frozen_clock_differ_and_increase() -> None:
    clock = frozen()
    ticks = [clock.tick() for _ in range(5)]
    assert ticks == sorted(set(ticks)), "each tick is new and later"
    assert hlc.physical_ms(ticks[0]) == NOW_MS


def test_after_observing_a_version_every_tick_is_above_it() -> None:
    clock = frozen()
    big = (NOW_MS + 3_600_000) << LOGICAL_BITS
    clock.observe(big)
    assert clock.tick() > big
    clock.observe(big - 1)  # an older version observed later does not pull the clock back
    assert clock.tick() > big + 1
