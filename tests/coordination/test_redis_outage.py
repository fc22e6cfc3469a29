"""Redis going away: every call fails fast with CoordinationUnavailable, and the same backend recovers by itself.

The shared Redis is never stopped: the backend talks to it through a TCP proxy this test closes and reopens.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

import anyio
import pytest

from app.coordination import CoordinationUnavailable, RedisCoordination, SessionKey
from tests.coordination.conftest import delete_prefix

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


class Proxy:
    """Forwards TCP connections to Redis; ``stop`` refuses new ones and cuts the open ones."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._drop_next_reply = False
        self._flowing = asyncio.Event()
        self._flowing.set()

    def hang(self) -> None:
        """Keep every connection open but forward nothing, as a Redis stopped with SIGSTOP does."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def drop_next_reply(self) -> None:
        """Let the next command reach Redis, then cut the connection instead of delivering its reply."""
        self._drop_next_reply = True

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer, replies=True))
        self._writers -= {writer, up_writer}

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool = False) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()
                if replies and self._drop_next_reply:
                    self._drop_next_reply = False
                    break
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.transport.abort()


@contextlib.asynccontextmanager
async def proxied(redis_url: str) -> AsyncIterator[Proxy]:
    parsed = urlparse(redis_url)
    proxy = Proxy(parsed.hostname or "127.0.0.1", parsed.port or 6379)
    await proxy.start()
    try:
        yield proxy
    finally:
        with contextlib.suppress(AssertionError):
            await proxy.stop()


@contextlib.asynccontextmanager
async def proxied_backend(redis_url: str, prefix: str) -> AsyncIterator[tuple[Proxy, RedisCoordination]]:
    """A Redis backend that reaches Redis only through a proxy the test controls; cleaned up afterwards."""
    async with proxied(redis_url) as proxy:
        db = urlparse(redis_url).path or "/0"
        coord = RedisCoordination(f"redis://127.0.0.1:{proxy.port}{db}", prefix=prefix)
        try:
            yield proxy, coord
        finally:
            await coord.close()
            await delete_prefix(redis_url, prefix)


async def test_outage_raises_unavailable_and_recovers(redis_url: str, prefix: str) -> None:
    key = SessionKey(f"u-{uuid.uuid4().hex[:8]}", "outage")
    async with proxied_backend(redis_url, prefix) as (proxy, coord):
        held = (await coord.claim(key, "alice", ["a.py"])).granted[0]
        change = await coord.broadcast(key, "alice", ["a.py"], "before the outage")
        await coord.touch(key, "alice")

        async with coord.subscribe(key) as events:
            await proxy.stop()
            # A live subscription ends with the same error rather than hanging.
            with anyio.fail_after(10), pytest.raises(CoordinationUnavailable):
                await anext(events)

        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("claim", lambda: coord.claim(key, "bob", ["b.py"])),
            ("release", lambda: coord.release(key, "alice", ["a.py"])),
            ("claims", lambda: coord.claims(key)),
            ("broadcast", lambda: coord.broadcast(key, "bob", [], "during the outage")),
            ("changes", lambda: coord.changes(key)),
            ("touch", lambda: coord.touch(key, "bob")),
            ("presence", lambda: coord.presence(key)),
            ("ping", coord.ping),
            ("subscribe", lambda: coord.subscribe(key).__aenter__()),
        ]
        for name, call in calls:
            started = time.monotonic()
            with anyio.fail_after(10), pytest.raises(CoordinationUnavailable, match="coordination unavailable"):
                await call()
            assert time.monotonic() - started < 3, f"{name} took too long to fail"

        await proxy.start()
        # Same backend object, no reconnect call: it finds Redis again and nothing was lost or half-done.
        with anyio.fail_after(10):
            await coord.ping()
            assert await coord.claims(key) == [held]
            assert (await coord.changes(key)).changes == [change]
            assert [p.agent for p in await coord.presence(key)] == ["alice"]
            assert (await coord.claim(key, "bob", ["b.py"])).granted
            async with coord.subscribe(key) as events:
                await coord.release(key, "alice", ["a.py"])
                event = await anext(events)
            assert (event.kind, event.agent, event.data) == ("release", "alice", {"paths": ["a.py"]})


async def test_a_lost_reply_does_not_apply_a_call_twice(redis_url: str, prefix: str) -> None:
    """The client retries a call whose reply was lost; Redis had already run it, and must not run it again."""
    key = SessionKey(f"u-{uuid.uuid4().hex[:8]}", "lost-replies")
    async with proxied_backend(redis_url, prefix) as (proxy, coord):
        # Load the scripts first, so that each call below is one command and the dropped reply is its reply.
        await coord.claim(key, "warm-up", ["w.py"])
        await coord.release(key, "warm-up", ["w.py"])
        await coord.broadcast(key, "warm-up", [], "warm-up")

        proxy.drop_next_reply()
        change = await coord.broadcast(key, "alice", ["a.py"], "once")
        assert [c.summary for c in (await coord.changes(key, exclude_agent="warm-up")).changes] == ["once"]
        assert (await coord.changes(key, exclude_agent="warm-up")).changes == [change]

        proxy.drop_next_reply()
        claim = (await coord.claim(key, "alice", ["a.py"])).granted[0]
        assert (await coord.claims(key)) == [claim]
        assert (await coord.claim(key, "alice", ["a.py"])).granted[0].fencing_token == claim.fencing_token + 1

        proxy.drop_next_reply()
        released = await coord.release(key, "alice", ["a.py"])
        assert (released.released, released.not_held) == (["a.py"], [])
        assert await coord.claims(key) == []


async def test_a_hung_redis_fails_the_first_call_within_the_budget_and_the_rest_at_once(
    redis_url: str, prefix: str
) -> None:
    key = SessionKey(f"u-{uuid.uuid4().hex[:8]}", "hung")
    async with proxied_backend(redis_url, prefix) as (proxy, coord):
        await coord.claim(key, "alice", ["a.py"])
        async with coord.subscribe(key) as events:
            proxy.hang()
            started = time.monotonic()
            with anyio.fail_after(10), pytest.raises(CoordinationUnavailable):
                await coord.claim(key, "bob", ["b.py"])
            first = time.monotonic() - started
            # The command timeout is 2 s, retries included (before the breaker, a hung Redis took 19 s here).
            assert first < 4.0, f"the first call took {first:.2f} s"  # a 2 s budget, and slack for a busy machine
            # A live subscription gets nothing from a hung Redis, not even an error: the breaker ends it.
            with anyio.fail_after(5), pytest.raises(CoordinationUnavailable):
                await anext(events)
        # (ping is the probe itself: it asks Redis, and is what readiness asks only while the breaker is closed.)
        for call in (
            lambda: coord.claims(key),
            lambda: coord.broadcast(key, "bob", [], "x"),
            lambda: coord.touch(key, "c"),
        ):
            started = time.monotonic()
            with anyio.fail_after(10), pytest.raises(CoordinationUnavailable, match="not answering"):
                await call()
            assert time.monotonic() - started < 1.0, "with the breaker open a call fails without waiting on Redis"

        proxy.resume()
        # The breaker's watchdog notices on its own that Redis answers again; no call has to find out first.
        with anyio.fail_after(5):
            while True:
                try:
                    # bob's claim may have been applied: it sat in Redis's socket until it woke (a timeout is an
                    # unknown outcome, as with any store); alice's is there either way.
                    assert "a.py" in [c.path for c in await coord.claims(key)]
                    break
                except CoordinationUnavailable:
                    await anyio.sleep(0.05)


async def test_a_subscription_that_outlived_an_outage_ends_though_its_connection_never_failed(
    redis_url: str, prefix: str
) -> None:
    """The breaker opened and closed again between two looks of the subscription (redis-py may also reconnect a
    subscriber quietly): what was published meanwhile may be lost, so the subscription ends and its reader resyncs."""
    from app.redis_breaker import RedisBreaker

    key = SessionKey(f"u-{uuid.uuid4().hex[:8]}", "blink")
    breaker = RedisBreaker(redis_url)
    coord = RedisCoordination(redis_url, prefix=prefix, breaker=breaker)
    try:
        async with coord.subscribe(key) as events:
            breaker.trip("an outage too short for a subscriber to see")
            assert await breaker.ping()  # Redis answers: closed again
            assert not breaker.is_open
            # Redis answers the subscriber's own liveness pings all along: only the outage itself can end it.
            with anyio.fail_after(10), pytest.raises(CoordinationUnavailable, match="unreachable meanwhile"):
                await anext(events)
    finally:
        await coord.close()
        await breaker.close()
        await delete_prefix(redis_url, prefix)


async def test_a_quiet_subscription_on_a_healthy_redis_stays_open(redis_url: str, prefix: str) -> None:
    """Its liveness pings are answered: quiet is not dead (past one ping interval and its wait for the answer)."""
    key = SessionKey(f"u-{uuid.uuid4().hex[:8]}", "quiet")
    coord = RedisCoordination(redis_url, prefix=prefix)
    try:
        async with coord.subscribe(key) as events:
            heard: list[Any] = []

            async def read_one() -> None:
                heard.append(await anext(events))

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(read_one)
                    await anyio.sleep(8)
                    assert not heard and not tasks.cancel_scope.cancel_called
                    await coord.broadcast(key, "alice", ["a.py"], "still here")
            assert [event.kind for event in heard] == ["change"]
    finally:
        await coord.close()
        await delete_prefix(redis_url, prefix)
