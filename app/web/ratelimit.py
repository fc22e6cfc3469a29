"""Count failures per key in a sliding window: "5 failed logins per 5 minutes", then "try again in N s".

Redis holds the counts when a URL is configured, so every instance sees the same ones; otherwise they live in this
process. Keys are hashed, so emails and addresses never appear in Redis. Reusable by anything that needs to slow down
guessing (logins, token endpoints).
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.errors import RateLimited
from app.redis_breaker import RedisBreaker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``attempts`` hits within any ``window_seconds``."""

    attempts: int
    window_seconds: float


class RateLimiter(Protocol):
    async def retry_after(self, key: str, limit: Limit) -> int | None:
        """Whole seconds until ``key`` may try again under ``limit``, or None when it may now."""
        ...

    async def hit(self, key: str, limit: Limit) -> None:
        """Record one attempt (usually a failure) against ``key``."""
        ...

    async def reset(self, key: str) -> None:
        """Forget ``key``'s attempts (e.g. after a successful login)."""
        ...

    async def close(self) -> None: ...


async def raise_if_limited(limiter: RateLimiter, key: str, limit: Limit, what: str = "attempts") -> None:
    """RateLimited (429, with Retry-After) when ``key`` is over ``limit``."""
    wait = await limiter.retry_after(key, limit)
    if wait is not None:
        raise RateLimited(
            f"too many {what}, try again in {wait} s", headers={"Retry-After": str(wait)}, retry_after=wait
        )


def _wait(oldest_blocking: float, window: float, now: float) -> int:
    return max(1, math.ceil(oldest_blocking + window - now))


class MemoryRateLimiter:
    """Sliding-window counts in this process (a single instance only)."""

    MAX_KEYS = 100_000

    def __init__(self) -> None:
        self._hits: dict[str, deque[float]] = {}
        self._windows: dict[str, float] = {}

    def _live(self, key: str, window: float, now: float) -> deque[float]:
        hits = self._hits.get(key)
        if hits is None:
            return deque()
        while hits and hits[0] <= now - window:
            hits.popleft()
        if not hits:
            del self._hits[key]
            self._windows.pop(key, None)
        return hits

    async def retry_after(self, key: str, limit: Limit) -> int | None:
        now = time.monotonic()
        hits = self._live(key, limit.window_seconds, now)
        if len(hits) < limit.attempts:
            return None
        return _wait(hits[len(hits) - limit.attempts], limit.window_seconds, now)

    async def hit(self, key: str, limit: Limit) -> None:
        now = time.monotonic()
        if len(self._hits) >= self.MAX_KEYS:
            self._sweep(now)
        self._live(key, limit.window_seconds, now)
        self._hits.setdefault(key, deque()).append(now)
        self._windows[key] = limit.window_seconds

    def _sweep(self, now: float) -> None:
        for key in list(self._hits):
            self._live(key, self._windows.get(key, 0.0), now)

    async def reset(self, key: str) -> None:
        self._hits.pop(key, None)
        self._windows.pop(key, None)

    async def close(self) -> None:
        self._hits.clear()


class RedisRateLimiter:
    """Sliding-window counts in a Redis sorted set per key, shared by every instance.

    When Redis cannot answer, counting carries on in this process rather than letting guesses through unlimited.
    """

    def __init__(
        self, url: str, *, namespace: str = "engram:ratelimit", breaker: RedisBreaker | None = None, budget: float = 0.5
    ) -> None:
        self._redis: Redis = Redis.from_url(url, socket_timeout=budget, socket_connect_timeout=budget)
        self._namespace = namespace
        self._fallback = MemoryRateLimiter()
        self._own_breaker = breaker is None
        self._breaker = breaker or RedisBreaker(url)
        self._budget = budget

    def _guard(self) -> Any:
        if self._own_breaker:
            self._breaker.start()
        return self._breaker.guard(self._budget, decisive=False)

    def _key(self, key: str) -> str:
        return f"{self._namespace}:{hashlib.sha256(key.encode()).hexdigest()[:40]}"

    async def retry_after(self, key: str, limit: Limit) -> int | None:
        now = time.time()
        name = self._key(key)
        try:
            async with self._guard(), self._redis.pipeline(transaction=True) as pipe:
                pipe.zremrangebyscore(name, 0, now - limit.window_seconds)
                pipe.zrange(name, 0, -1, withscores=True)
                _, entries = await pipe.execute()
        except (RedisError, OSError):
            log.debug("rate limiter: Redis unavailable, counting in-process", exc_info=True)
            return await self._fallback.retry_after(key, limit)
        local = await self._fallback.retry_after(key, limit)
        if len(entries) < limit.attempts:
            return local
        remote = _wait(float(entries[len(entries) - limit.attempts][1]), limit.window_seconds, now)
        return max(remote, local or 0)

    async def hit(self, key: str, limit: Limit) -> None:
        now = time.time()
        name = self._key(key)
        try:
            async with self._guard(), self._redis.pipeline(transaction=True) as pipe:
                pipe.zremrangebyscore(name, 0, now - limit.window_seconds)
                pipe.zadd(name, {f"{now:.6f}:{secrets.token_hex(4)}": now})
                pipe.expire(name, math.ceil(limit.window_seconds) + 1)
                await pipe.execute()
        except (RedisError, OSError):
            log.debug("rate limiter: Redis unavailable, counting in-process", exc_info=True)
            await self._fallback.hit(key, limit)

    async def reset(self, key: str) -> None:
        await self._fallback.reset(key)
        try:
            async with self._guard():
                await self._redis.delete(self._key(key))
        except (RedisError, OSError):
            log.debug("rate limiter: Redis unavailable, could not reset", exc_info=True)

    async def close(self) -> None:
        await self._redis.aclose()
        if self._own_breaker:
            await self._breaker.close()


def create_rate_limiter(
    redis_url: str | None, *, namespace: str = "engram:ratelimit", breaker: RedisBreaker | None = None
) -> RateLimiter:
    """Redis when a URL is configured (shared by every instance), else in-process."""
    if redis_url:
        return RedisRateLimiter(redis_url, namespace=namespace, breaker=breaker)
    return MemoryRateLimiter()
