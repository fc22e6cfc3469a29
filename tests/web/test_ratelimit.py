"""The sliding-window limiter, in-process and in Redis, and the login limit through Redis end to end."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest

from app.errors import RateLimited
from app.web.ratelimit import Limit, MemoryRateLimiter, RateLimiter, RedisRateLimiter, raise_if_limited
from tests.harness import RunningServer
from tests.web.conftest import new_address, new_email

FIVE_PER_MINUTE = Limit(attempts=5, window_seconds=60)


async def _five_then_blocked(limiter: RateLimiter) -> None:
    key = f"k-{uuid.uuid4().hex}"
    for _ in range(5):
        assert await limiter.retry_after(key, FIVE_PER_MINUTE) is None
        await limiter.hit(key, FIVE_PER_MINUTE)
    wait = await limiter.retry_after(key, FIVE_PER_MINUTE)
    assert wait is not None and 55 <= wait <= 60
    with pytest.raises(RateLimited) as raised:
        await raise_if_limited(limiter, key, FIVE_PER_MINUTE)
    assert raised.value.message == f"too many attempts, try again in {wait} s"
    assert raised.value.headers == {"Retry-After": str(wait)}
    assert await limiter.retry_after(f"other-{key}", FIVE_PER_MINUTE) is None
    await limiter.reset(key)
    assert await limiter.retry_after(key, FIVE_PER_MINUTE) is None


async def _window_slides(limiter: RateLimiter) -> None:
    key = f"k-{uuid.uuid4().hex}"
    short = Limit(attempts=2, window_seconds=0.3)
    await limiter.hit(key, short)
    await limiter.hit(key, short)
    assert await limiter.retry_after(key, short) == 1  # rounded up to whole seconds
    deadline = time.monotonic() + 30  # the window is 0.3 s: only a window that never slides reaches this
    while await limiter.retry_after(key, short) is not None:
        assert time.monotonic() < deadline, "the window never slid"
        await asyncio.sleep(0.05)


def test_in_process_limiter_blocks_after_the_limit_and_forgets_on_reset() -> None:
    async def run() -> None:
        limiter = MemoryRateLimiter()
        await _five_then_blocked(limiter)
        await _window_slides(limiter)

    asyncio.run(run())


@pytest.mark.redis
def test_redis_limiter_blocks_after_the_limit_and_forgets_on_reset(redis_url: str) -> None:
    async def run() -> None:
        limiter = RedisRateLimiter(redis_url, namespace=f"test:{uuid.uuid4().hex}")
        try:
            await _five_then_blocked(limiter)
            await _window_slides(limiter)
        finally:
            await limiter.close()

    asyncio.run(run())


@pytest.mark.redis
def test_redis_limiter_is_shared_between_instances(redis_url: str) -> None:
    async def run() -> None:
        namespace = f"test:{uuid.uuid4().hex}"
        one, two = RedisRateLimiter(redis_url, namespace=namespace), RedisRateLimiter(redis_url, namespace=namespace)
        try:
            for _ in range(5):
                await one.hit("shared", FIVE_PER_MINUTE)
            assert await two.retry_after("shared", FIVE_PER_MINUTE) is not None
        finally:
            await one.close()
            await two.close()

    asyncio.run(run())


def test_an_unreachable_redis_falls_back_to_counting_in_process() -> None:
    async def run() -> None:
        limiter = RedisRateLimiter("redis://127.0.0.1:1/0")
        try:
            for _ in range(5):
                await limiter.hit("k", FIVE_PER_MINUTE)
            assert await limiter.retry_after("k", FIVE_PER_MINUTE) is not None
        finally:
            await limiter.close()

    asyncio.run(run())


@pytest.mark.redis
def test_the_login_limit_holds_through_redis(https_api: RunningServer) -> None:
    import httpx

    # The https server sets Secure cookies, which a client on plain http never returns: send them by hand.
    with httpx.Client(base_url=https_api.base_url, headers={"Accept": "text/html"}, timeout=30) as http:
        email = new_email()
        statuses = []
        for _ in range(6):
            page = http.get("/login", headers={"X-Forwarded-For": new_address()})
            nonce = page.headers["set-cookie"].split(";")[0]
            token = re.search(r'name="_csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
            response = http.post(
                "/login",
                data={"_csrf": token, "email": email, "password": "wrong password"},
                headers={"Cookie": nonce, "X-Forwarded-For": new_address()},
            )
            statuses.append(response.status_code)
    assert statuses == [400] * 5 + [429]
