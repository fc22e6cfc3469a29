"""One judgement, per server, of whether Redis answers: a circuit breaker shared by everything that talks to it.

A Redis that refuses connections fails a call in a millisecond; a hung one (stopped, partitioned) lets every call wait
for its socket timeout, and redis-py's retries multiply that. So: every call runs within a time budget; the first that
runs out (or cannot connect) opens the breaker; while it is open, calls fail at once and their callers degrade
(coordination answers "unavailable", rate limits count in-process); a watchdog pings Redis on a connection of its own
and closes the breaker as soon as Redis answers again. The watchdog also pings while the breaker is closed, so a hang
is usually noticed before any request has to wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.task_stopping import cancel_and_wait

log = logging.getLogger(__name__)

# What "Redis cannot serve us" looks like; anything else is a bug and passes through.
UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ReadOnlyError,
    OutOfMemoryError,
    OSError,
    TimeoutError,
)


class BreakerOpen(RedisConnectionError):
    """Raised at once, without touching Redis, while the breaker is open."""


class RedisBreaker:
    """Shared by the coordination backend, the rate limiters and the readiness probe of one server."""

    def __init__(
        self,
        url: str,
        *,
        watch_interval: float = 1.0,
        open_watch_interval: float = 0.25,
        ping_timeout: float = 1.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        # The watchdog's own connection, so a pool full of hung calls never delays the ping that ends them.
        self._ping_client = Redis.from_url(url, socket_connect_timeout=ping_timeout, socket_timeout=ping_timeout)
        self._watch_interval = watch_interval
        self._open_watch_interval = open_watch_interval
        self._ping_timeout = ping_timeout
        self._on_change = on_change
        self._opened_at: float | None = None
        self._reason = ""
        self._outages = 0
        self._closed = asyncio.Event()
        self._closed.set()
        self._watchdog: asyncio.Task[None] | None = None
        self._failed_pings = 0
        self._wake = asyncio.Event()

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    @property
    def outages(self) -> int:
        """How many times the breaker has opened: a subscription that outlived a change here may have missed
        messages, even if its own connection never failed (redis-py reconnects it quietly)."""
        return self._outages

    @property
    def reason(self) -> str:
        """Why the breaker is open, and since when (for errors and the readiness probe)."""
        if self._opened_at is None:
            return ""
        return f"{self._reason} (no answer for {time.monotonic() - self._opened_at:.1f} s)"

    def trip(self, reason: str) -> None:
        """Open the breaker (once; later trips while open change nothing)."""
        if self._opened_at is not None:
            return
        self._opened_at = time.monotonic()
        self._outages += 1
        self._reason = reason
        self._closed.clear()
        log.warning("redis is not answering (%s): coordination is unavailable and rate limits count in-process", reason)
        if self._on_change is not None:
            self._on_change(True)

    def _close(self) -> None:
        if self._opened_at is None:
            return
        log.warning("redis answers again after %.1f s: coordination and shared limits resume", self.downtime)
        self._opened_at = None
        self._closed.set()
        if self._on_change is not None:
            self._on_change(False)

    @property
    def downtime(self) -> float:
        return 0.0 if self._opened_at is None else time.monotonic() - self._opened_at

    async def wait_closed(self) -> None:
        """Return once the breaker is (or becomes) closed."""
        await self._closed.wait()

    @asynccontextmanager
    async def guard(self, budget: float, *, decisive: bool = True) -> AsyncIterator[None]:
        """Run the block against Redis within ``budget`` seconds; BreakerOpen at once while the breaker is open.

        A block that cannot reach Redis opens the breaker. One that runs out of time opens it when ``decisive`` (a
        budget long enough that only a hung Redis explains it); a short budget, which a busy event loop can overrun
        as well, only makes the watchdog ping at once. Either way the error is re-raised (TimeoutError for the
        budget), so the caller maps one family of errors to its own degraded answer."""
        if self._opened_at is not None:
            raise BreakerOpen(f"redis is not answering: {self.reason}")
        try:
            async with asyncio.timeout(budget):
                yield
        except TimeoutError:
            if decisive:
                self.trip(f"a call took longer than {budget:g} s")
            else:
                self._wake.set()
            raise
        except BreakerOpen:
            raise
        except UNAVAILABLE as exc:
            self.trip(type(exc).__name__)
            raise

    async def ping(self, *, trip_after: int = 1) -> bool:
        """One ping on the watchdog's connection: True (and the breaker closed) when Redis answers; after
        ``trip_after`` failures in a row, the breaker opens."""
        try:
            async with asyncio.timeout(self._ping_timeout):
                await self._ping_client.ping()
        except UNAVAILABLE as exc:
            self._failed_pings += 1
            if self._failed_pings >= trip_after:
                self.trip(f"ping failed ({type(exc).__name__})")
            return False
        self._failed_pings = 0
        self._close()
        return True

    async def _watch(self) -> None:
        while True:
            interval = self._open_watch_interval if self.is_open else self._watch_interval
            with suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            self._wake.clear()
            try:
                # Two misses in a row while closed: one slow ping may be this process's busy event loop, not Redis.
                await self.ping(trip_after=1 if self.is_open else 2)
            except Exception:  # the watchdog must outlive anything odd a ping raises
                log.exception("redis watchdog ping failed unexpectedly")

    def start(self) -> None:
        """Start the watchdog (in the running loop; once)."""
        if self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch(), name="redis-watchdog")

    async def close(self) -> None:
        if self._watchdog is not None:
            watchdog, self._watchdog = self._watchdog, None
            await cancel_and_wait(watchdog, again_after=0.1)  # nothing of its own to clean up
        await self._ping_client.aclose()
