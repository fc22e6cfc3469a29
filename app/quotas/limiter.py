"""Request rate limits by GCRA (the generic cell rate algorithm): one number per key, checked and updated atomically.

A key holds its "theoretical arrival time". A request is allowed when it arrives no earlier than that time minus the
burst allowance (a whole minute's worth); each allowed request pushes the time on by one emission interval. Several
keys (a key's and its user's limit) are checked in one call and only counted when all of them allow the request.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import redis.asyncio as redis
from redis.exceptions import RedisError

from app.redis_breaker import RedisBreaker

log = logging.getLogger(__name__)

# KEYS = the limited keys, then the tally keys; ARGV[1] = how many keys are limited, then the emission interval (µs) of
# each limited key, then the lifetime (s) of each tally key. The burst allowance is one window. An allowed request
# adds one to every tally in the same round trip. Redis's clock is the clock, so instances with skewed clocks agree.
# Returns {} when allowed, else {index, wait µs} of the first key that refuses.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = 60000000
local tats = {}
local limited = tonumber(ARGV[1])
for i = 1, limited do
  local interval = tonumber(ARGV[i + 1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local allow_at = tat + interval - window
  if now < allow_at then return {i, allow_at - now} end
  tats[i] = tat + interval
end
for i = 1, limited do
  redis.call('SET', KEYS[i], tats[i], 'PX', math.ceil((tats[i] - now) / 1000) + 1000)
end
for i = limited + 1, #KEYS do
  redis.call('INCR', KEYS[i])
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[i + 1]))
end
return {}
"""

WINDOW_US = 60_000_000
# A tally: a counter key and how many seconds it is kept (the usage page's requests per minute and per hour).
Tally = tuple[str, int]


class RateLimiter(Protocol):
    async def acquire(
        self, limits: Sequence[tuple[str, int]], tallies: Sequence[Tally] = ()
    ) -> tuple[int, float] | None:
        """Count one request against every (key, per_minute) limit, or against none of them; when allowed, also
        add one to each tally counter.

        None when allowed; else the index of the limit that refused and the seconds to wait."""
        ...

    async def tallies(self, keys: Sequence[str]) -> list[int]:
        """The tally counters ``acquire`` added to, 0 for those never counted or expired."""
        ...

    async def close(self) -> None: ...


def _interval(per_minute: int) -> int:
    return max(1, WINDOW_US // per_minute)


class MemoryRateLimiter:
    """One process's limits: for the embedded default and as the fallback when Redis cannot answer."""

    def __init__(self) -> None:
        self._tat: dict[str, int] = {}
        self._tallies: dict[str, tuple[int, float]] = {}

    async def acquire(
        self, limits: Sequence[tuple[str, int]], tallies: Sequence[Tally] = ()
    ) -> tuple[int, float] | None:
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
        for key, seconds in tallies:
            self._tally(key, seconds)
        return None

    def _tally(self, key: str, seconds: int) -> None:
        now = time.monotonic()
        count, expires = self._tallies.get(key, (0, now))
        self._tallies[key] = (count + 1 if expires >= now else 1, now + seconds)
        if len(self._tallies) > 100_000:
            self._tallies = {k: v for k, v in self._tallies.items() if v[1] > now}

    async def tallies(self, keys: Sequence[str]) -> list[int]:
        now = time.monotonic()
        found = [self._tallies.get(key) for key in keys]
        return [entry[0] if entry is not None and entry[1] > now else 0 for entry in found]

    async def close(self) -> None:
        self._tat.clear()
        self._tallies.clear()


class RedisRateLimiter:
    """Limits shared by every instance. If Redis cannot answer, counting carries on in this process.

    Every request passes here, so Redis gets a short budget: a hung Redis costs the first request at most that,
    and none after it while the shared breaker is open."""

    def __init__(
        self,
        url: str,
        namespace: str = "engram:quota",
        *,
        breaker: RedisBreaker | None = None,
        budget: float = 0.25,
        on_fallback: Callable[[], None] | None = None,
    ) -> None:
        self._redis = redis.Redis.from_url(url, socket_connect_timeout=budget, socket_timeout=budget)
        self._script = self._redis.register_script(_GCRA)
        self._namespace = namespace
        self._fallback = MemoryRateLimiter()
        self._own_breaker = breaker is None
        self._breaker = breaker or RedisBreaker(url)
        self._budget = budget
        self._on_fallback = on_fallback

    async def acquire(
        self, limits: Sequence[tuple[str, int]], tallies: Sequence[Tally] = ()
    ) -> tuple[int, float] | None:
        keys = [f"{self._namespace}:{key}" for key, _ in (*limits, *tallies)]
        args = [len(limits), *(_interval(per_minute) for _, per_minute in limits), *(s for _, s in tallies)]
        if self._own_breaker:
            self._breaker.start()
        try:
            async with self._breaker.guard(self._budget, decisive=False):
                refused = await self._script(keys=keys, args=args)
        except (RedisError, OSError):
            # The breaker logged the outage once; each request that counts in-process shows in the metric.
            if self._on_fallback is not None:
                self._on_fallback()
            return await self._fallback.acquire(limits, tallies)
        if not refused:
            return None
        return int(refused[0]) - 1, int(refused[1]) / 1_000_000

    async def tallies(self, keys: Sequence[str]) -> list[int]:
        if not keys:
            return []
        try:
            async with self._breaker.guard(self._budget, decisive=False):
                values = await self._redis.mget([f"{self._namespace}:{key}" for key in keys])
        except (RedisError, OSError):
            return await self._fallback.tallies(keys)
        return [int(v) if v is not None else 0 for v in values]

    async def close(self) -> None:
        await self._redis.aclose()
        if self._own_breaker:
            await self._breaker.close()


def retry_after_header(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def create_limiter(
    redis_url: str | None,
    *,
    breaker: RedisBreaker | None = None,
    budget: float = 0.25,
    on_fallback: Callable[[], None] | None = None,
) -> RateLimiter:
    if not redis_url:
        return MemoryRateLimiter()
    return RedisRateLimiter(redis_url, breaker=breaker, budget=budget, on_fallback=on_fallback)
