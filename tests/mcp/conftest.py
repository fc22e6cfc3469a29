"""Helpers for the MCP tests: the official MCP client over real HTTP, pointed at /mcp/v2/{client}/{user_id}."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.harness import RunningServer, free_port, serve


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def mcp_url(server: RunningServer, user_id: str, client_name: str = "claude code") -> str:
    return f"{server.base_url}/mcp/v2/{quote(client_name, safe='')}/{user_id}"


@asynccontextmanager
async def connect(
    server: RunningServer, key: str, user_id: str, *, client_name: str = "claude code", **options: Any
) -> AsyncIterator[Client]:
    """An initialized official MCP client (handshake era, so a stateful session with a GET stream)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=300))
    async with http:
        transport = streamable_http_client(mcp_url(server, user_id, client_name), http_client=http)
        async with Client(transport, mode=options.pop("mode", "legacy"), **options) as client:
            yield client


def session_id(user_id: str, session: str, agent: str) -> str:
    return f"{user_id}__session__{session}__{agent}"


async def raw_session(http: httpx.AsyncClient, url: str, key: str) -> dict[str, str]:
    """An MCP session opened by hand (initialize, then initialized), for tests that watch the wire: the headers each
    later request of that session carries."""
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    opened = await http.post(url, json=initialize, headers=headers)
    assert opened.status_code == 200, opened.text
    session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


async def hold_get_stream(
    http: httpx.AsyncClient, url: str, session: dict[str, str], ended: anyio.Event, chunks: list[bytes] | None = None
) -> None:
    """Hold the session's GET stream open until the server ends it (then set ``ended``), keeping what it sent."""
    async with http.stream("GET", url, headers=session) as stream:
        assert stream.status_code == 200
        async for chunk in stream.aiter_bytes():
            if chunks is not None:
                chunks.append(chunk)
    ended.set()


@pytest.fixture(params=["api", "redis_api"])
def either_backend(request: pytest.FixtureRequest) -> RunningServer:
    """The test runs twice: with in-process coordination, and with Redis. (A sync fixture, so the session-scoped
    servers are built before the test's event loop runs.)"""
    server: RunningServer = request.getfixturevalue(request.param)
    return server


def _redis_settings(tmp: Any, database_url: str, redis_url: str) -> Any:
    from tests.conftest import _settings

    return _settings(tmp, database_url, redis_url=redis_url)


@pytest.fixture(scope="session")
def redis_api(
    pg_database_url: str, redis_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """The server with Redis coordination."""
    with serve(
        _redis_settings(tmp_path_factory.mktemp("mcp-redis"), pg_database_url, redis_url), embedder=embedder
    ) as s:
        yield s


@pytest.fixture(scope="session")
def redis_api_pair(
    redis_api: RunningServer, pg_database_url: str, redis_url: str, embedder: object, tmp_path_factory: Any
) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two server instances sharing one database and one Redis."""
    settings = _redis_settings(tmp_path_factory.mktemp("mcp-redis-2"), pg_database_url, redis_url)
    settings.secret_key = redis_api.settings.secret_key  # the same keys must authenticate on both
    with serve(settings, embedder=embedder) as second:
        yield redis_api, second


@pytest.fixture(scope="session")
def redis_down_api(
    pg_database_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server configured for a Redis that does not answer."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    with serve(_redis_settings(tmp_path_factory.mktemp("mcp-dead"), pg_database_url, dead), embedder=embedder) as s:
        yield s
