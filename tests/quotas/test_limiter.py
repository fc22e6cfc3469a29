"""GCRA limits on both backends: a refused request counts against none of its limits."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from app.quotas.limiter import MemoryRateLimiter, RateLimiter, RedisRateLimiter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[RateLimiter]:
    if request.param == "memory":
        made: RateLimiter = MemoryRateLimiter()
    else:
        made = RedisRateLimiter(request.getfixturevalue("redis_url"), namespace=f"test:{uuid.uuid4().hex}")
    yield made
    await made.close()


async def test_a_minutes_allowance_then_a_wait(limiter: RateLimiter) -> None:
    key = uuid.uuid4().hex
    assert [await limiter.acquire([(key, 3)]) for _ in range(3)] == [None, None, None]
    refused = await limiter.acquire([(key, 3)])
    assert refused is not None
    index, wait = refused
    assert index == 0 and 0 < wait <= 20.0  # one emission interval is 60 s / 3


async def test_a_refusal_counts_against_none_of_the_limits(limiter: RateLimiter) -> None:
    key, user = uuid.uuid4().hex, uuid.uuid4().hex
    assert await limiter.acquire([(key, 2), (user, 1)]) is None
    refused = await limiter.acquire([(key, 2), (user, 1)])
    assert refused is not None and refused[0] == 1
    # The key's second request was not spent on the refused call.
    assert await limiter.acquire([(key, 2)]) is None
    assert await limiter.acquire([(key, 2)]) is not None


async def test_allowed_requests_are_tallied(limiter: RateLimiter) -> None:
    user, hour, minute, other = (uuid.uuid4().hex for _ in range(4))
    for _ in range(4):
        assert await limiter.acquire([(user, 10)], [(hour, 3600), (minute, 120)]) is None
    assert await limiter.acquire([(user, 1000)]) is None  # no tally: not counted
    # Refused requests are not tallied: the plan was not used.
    tight = uuid.uuid4().hex
    assert await limiter.acquire([(tight, 1)], [(hour, 3600)]) is None
    assert await limiter.acquire([(tight, 1)], [(hour, 3600)]) is not None
    assert await limiter.tallies([hour, minute, other]) == [5, 4, 0]
    assert await limiter.tallies([]) == []
