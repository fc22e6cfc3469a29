"""Fixtures for the coordination tests: both backends, each test in its own Redis key namespace."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
import redis.asyncio

from app.coordination import Coordination, MemoryCoordination, RedisCoordination, SessionKey

MakeBackend = Callable[..., Awaitable[Coordination]]


async def delete_prefix(url: str, prefix: str) -> None:
    """Delete every key a test wrote under its prefix (the shared server is never flushed)."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    """Poll until ``check`` holds, failing after ``within`` seconds. For expiry, which no event announces."""
    with anyio.fail_after(within):
        # Polling on purpose: expiry follows the store's clock and nothing signals it.
        while not await check():  # noqa: ASYNC110
            await anyio.sleep(0.005)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def prefix() -> str:
    """A Redis key prefix of this test alone."""
    return f"test:coord:{uuid.uuid4().hex}:"


@pytest.fixture
def key() -> SessionKey:
    return SessionKey(user_id=f"u-{uuid.uuid4().hex[:8]}", session="main")


@pytest.fixture(params=["memory", "redis"])
def backend_name(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        request.getfixturevalue("redis_url")
    return str(request.param)


@pytest.fixture
async def make_backend(backend_name: str, prefix: str, request: pytest.FixtureRequest) -> AsyncIterator[MakeBackend]:
    """Build backends of the parametrized kind; Redis ones share the test's prefix, like two server instances."""
    url = request.getfixturevalue("redis_url") if backend_name == "redis" else ""
    made: list[Coordination] = []

    async def make(**options: Any) -> Coordination:
        backend: Coordination
        if backend_name == "redis":
            backend = RedisCoordination(url, prefix=prefix, **options)
        else:
            backend = MemoryCoordination(**options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()
    if url:
        await delete_prefix(url, prefix)


@pytest.fixture
async def coord(make_backend: MakeBackend) -> Coordination:
    return await make_backend()
