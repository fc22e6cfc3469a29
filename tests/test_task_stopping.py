"""Stopping a background task: it ends even when its code swallows a cancellation, as redis-py sometimes does."""

from __future__ import annotations

import asyncio
import random

import anyio
import pytest

from app.redis_breaker import RedisBreaker
from app.task_stopping import cancel_and_wait

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_task_that_swallows_its_first_cancellation_is_ended_by_the_next() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    with anyio.fail_after(30):
        await cancel_and_wait(task, again_after=0.05)
    assert task.cancelled() and swallowed == 1


async def test_a_task_that_fails_as_it_ends_counts_as_ended() -> None:
    async def failing() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            raise RuntimeError("broken clean-up")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with anyio.fail_after(30):
        await cancel_and_wait(task)
    assert isinstance(task.exception(), RuntimeError)


@pytest.mark.redis
async def test_a_breaker_closed_while_its_watchdog_pings_redis_ends(redis_url: str) -> None:
    """redis-py 8.1 returned from a ping cancelled at the wrong moment as if nothing happened: the watchdog went on
    pinging and ``close`` waited for it forever (a CI run hung there). Closed at random moments, every close ends."""
    rng = random.Random(7)
    for _ in range(40):
        breaker = RedisBreaker(redis_url, watch_interval=0.001)
        breaker.start()
        await asyncio.sleep(rng.uniform(0, 0.03))
        with anyio.fail_after(30):
            await breaker.close()
