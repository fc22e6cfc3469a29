"""Request rate limits by GCRA (the generic cell rate algorithm): one number per key, checked and updated atomically.

A key holds its "theoretical arrival time". A request is allowed when it arrives no earlier than that time minus the
burst allowance (a whole minute's worth); each allowed request pushes the time on by one emission interval.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Protocol

import redis.asyncio as redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# KEYS[1] = the key; ARGV[1] = emission interval (µs), ARGV[2] = burst allowance (µs). Redis's clock is the clock, so
# instances with skewed clocks agree. Returns 0 when allowed, else the microseconds to wait.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat + interval - burst
if now < allow_at then return allow_at - now end
redis.call('SET', KEYS[1], tat + interval, 'PX', math.ceil((tat + interval - now) / 1000) + 1000)
return 0
"""

WINDOW_US = 60_000_000


class RateLimiter(Protocol):
    async def acquire(self, key: str, per_minute: int) -> float | None:
        """None when a request under ``key`` may go now (and counts it); else the seconds to wait."""
        ...

    async def close(self) -> None: ...


def _interval(per_minute: int) -> int:
    return max(1, WINDOW_US // per_minute)


class MemoryRateLimiter:
    """One process's limits: for the embedded default and as the fallback when Redis cannot answer."""

    def __init__(self) -> None:
        self._tat: dict[str, int] = {}

    async def acquire(self, key: str, per_minute: int) -> float | None:
        now = time.monotonic_ns() // 1000
        interval = _interval(per_minute)
        tat = max(self._tat.get(key, now), now)
        allow_at = tat + interval - WINDOW_US
        if now < allow_at:
            return (allow_at - now) / 1_000_000
        self._tat[key] = tat + interval
        if len(self._tat) > 100_000:  # forget keys whose allowance has fully refilled
            self._tat = {k: v for k, v in self._tat.items() if v > now}
        return None

    async def close(self) -> None:
        self._tat.clear()


class RedisRateLimiter:
    """Limits shared by every instance. If Redis cannot answer, counting carries on in this process."""

    def __init__(self, url: str, namespace: str = "engram:quota") -> None:
        self._redis = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        self._script = self._redis.register_script(_GCRA)
        self._namespace = namespace
        self._fallback = MemoryRateLimiter()

    async def acquire(self, key: str, per_minute: int) -> float | None:
        try:
            wait_us = int(
                await self._script(keys=[f"{self._namespace}:{key}"], args=[_interval(per_minute), WINDOW_US])
            )
        except (RedisError, OSError):
            log.warning("rate limits fall back to this instance: Redis did not answer")
            return await self._fallback.acquire(key, per_minute)
        return wait_us / 1_000_000 if wait_us > 0 else None

    async def close(self) -> None:
        await self._redis.aclose()


def retry_after_header(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def create_limiter(redis_url: str | None) -> RateLimiter:
    return RedisRateLimiter(redis_url) if redis_url else MemoryRateLimiter()
