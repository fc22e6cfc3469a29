"""Request rate limits by GCRA (the generic cell rate algorithm): one number per key, checked and updated atomically.

A key holds its "theoretical arrival time". A request is allowed when it arrives no earlier than that time minus the
burst allowance (a whole minute's worth); each allowed request pushes the time on by one emission interval. Several
keys (a key's and its user's limit) are checked in one call and only counted when all of them allow the request.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Protocol

import redis.asyncio as redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# KEYS = the limited keys; ARGV[i] = the emission interval (µs) of KEYS[i]; the burst allowance is one window.
# Redis's clock is the clock, so instances with skewed clocks agree. Returns {} when allowed, else {index, wait µs}
# of the first key that refuses.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = 60000000
local tats = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local allow_at = tat + interval - window
  if now < allow_at then return {i, allow_at - now} end
  tats[i] = tat + interval
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, tats[i], 'PX', math.ceil((tats[i] - now) / 1000) + 1000)
end
return {}
"""

WINDOW_US = 60_000_000


class RateLimiter(Protocol):
    async def acquire(self, limits: Sequence[tuple[str, int]]) -> tuple[int, float] | None:
        """Count one request against every (key, per_minute) limit, or against none of them.

        None when allowed; else the index of the limit that refused and the seconds to wait."""
        ...

    async def close(self) -> None: ...


def _interval(per_minute: int) -> int:
    return max(1, WINDOW_US // per_minute)


class MemoryRateLimiter:
    """One process's limits: for the embedded default and as the fallback when Redis cannot answer."""

    def __init__(self) -> None:
        self._tat: dict[str, int] = {}

    async def acquire(self, limits: Sequence[tuple[str, int]]) -> tuple[int, float] | None:
        now = time.monotonic_ns() // 1000
        updated = []
        for index, (key, per_minute) in enumerate(limits):
            interval = _interval(per_minute)
            tat = max(self._tat.get(key, now), now)
            allow_at = tat + interval - WINDOW_US
            if now < allow_at:
                return index, (allow_at - now) / 1_000_000
            updated.append((key, tat + interval))
        self._tat.update(updated)
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

    async def acquire(self, limits: Sequence[tuple[str, int]]) -> tuple[int, float] | None:
        keys = [f"{self._namespace}:{key}" for key, _ in limits]
        try:
            refused = await self._script(keys=keys, args=[_interval(per_minute) for _, per_minute in limits])
        except (RedisError, OSError):
            log.warning("rate limits fall back to this instance: Redis did not answer")
            return await self._fallback.acquire(limits)
        if not refused:
            return None
        return int(refused[0]) - 1, int(refused[1]) / 1_000_000

    async def close(self) -> None:
        await self._redis.aclose()


def retry_after_header(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def create_limiter(redis_url: str | None) -> RateLimiter:
    return RedisRateLimiter(redis_url) if redis_url else MemoryRateLimiter()
