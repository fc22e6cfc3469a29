"""Shared fixtures: real PostgreSQL and Redis, reached over real connections.

With ENGRAM_REQUIRE_SERVICES=1 (CI) an unreachable service fails the run; otherwise the tests that need it are skipped
with the reason shown.
"""

from __future__ import annotations

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")

import socket
import uuid
from collections.abc import Iterator

import pytest

PG_HOST = os.environ.get("ENGRAM_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("ENGRAM_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("ENGRAM_TEST_PG_USER", "postgres")
REDIS_URL = os.environ.get("ENGRAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REQUIRE_SERVICES = os.environ.get("ENGRAM_REQUIRE_SERVICES", "") not in ("", "0", "false")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=10):
            return True
    except OSError:
        return False


def _unavailable(what: str) -> None:
    message = f"{what} is not reachable"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message} and ENGRAM_REQUIRE_SERVICES=1 demands it", pytrace=False)
    pytest.skip(f"{message} (set ENGRAM_REQUIRE_SERVICES=1 to fail instead)")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A real Redis. Each test should namespace its keys (uuid) rather than flush the server."""
    from urllib.parse import urlparse

    parsed = urlparse(REDIS_URL)
    if not _reachable(parsed.hostname or "127.0.0.1", parsed.port or 6379):
        _unavailable(f"Redis at {REDIS_URL}")
    return REDIS_URL


@pytest.fixture(scope="session")
def pg_server() -> str:
    if not _reachable(PG_HOST, PG_PORT):
        _unavailable(f"PostgreSQL at {PG_HOST}:{PG_PORT}")
    return f"{PG_USER}@{PG_HOST}:{PG_PORT}"


def _admin_execute(sql: str) -> None:
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def run() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture(scope="session")
def pg_database_url(pg_server: str) -> Iterator[str]:
    """A throwaway PostgreSQL database, migrated to head, dropped at the end of the run."""
    name = f"engram_test_{uuid.uuid4().hex[:12]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    from app.migrate import upgrade_to_head

    upgrade_to_head(url)
    try:
        yield url
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def embedder() -> object:
    """The real offline embedder, loaded once for the whole run."""
    from app.memories.embedder import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder(threads=1)


def _settings(tmp: object, database_url: str, **overrides: object) -> object:
    from pathlib import Path

    from app.settings import Settings
    from tests.harness import free_port

    data_dir = Path(str(tmp))
    # Shared test servers take thousands of requests a minute; tests/quotas pins the real limits with small plans.
    overrides.setdefault("secret_key", "test-secret-" + uuid.uuid4().hex)
    # Most tests call from 127.0.0.1; tests/web/test_address_limits pins these limits on a server of its own.
    for limit in (
        "signups_per_hour",
        "client_registrations_per_hour",
        "token_failures_per_5_minutes",
        "device_authorizations_per_hour",
    ):
        overrides.setdefault(limit, 1_000_000)
    # Tests fire bursts of concurrent requests at shared servers on a machine that may be loaded: admission waits as
    # long as it takes there. tests/admission pins the refusals on servers of their own.
    overrides.setdefault("admission_queue_timeout_seconds", 30.0)
    overrides.setdefault("admission_overloaded_wait_seconds", 30.0)
    overrides.setdefault("admission_min_share", 1000)
    # The test servers share one PostgreSQL database, so each would watch and index every project any test registers
    # there, racing the server under test (whose embedded index then learns the others' writes only through its log
    # follower). Only the server the project tests use watches (``api``).
    overrides.setdefault("watch_projects", False)
    # Streams re-check their credential this often; small, so revocation tests need not wait 15 s.
    overrides.setdefault("stream_recheck_seconds", 0.2)
    overrides.setdefault(
        "plans",
        {"free": {"requests_per_minute": 1_000_000, "key_requests_per_minute": 1_000_000, "max_memories": 10**7}},
    )
    return Settings(
        host="127.0.0.1",
        port=free_port(),
        data_dir=data_dir,
        database_url=database_url,
        **overrides,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="session")
def api(pg_database_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The server over real HTTP on 127.0.0.1, backed by a throwaway PostgreSQL database and the embedded index."""
    from tests.harness import serve

    tmp = tmp_path_factory.mktemp("api")
    settings = _settings(tmp, pg_database_url, max_memory_chars=2000, max_body_bytes=65536, watch_projects=True)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture(scope="session")
def sqlite_api(embedder: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The same server on the embedded defaults: SQLite and the in-process index."""
    from app.migrate import upgrade_to_head
    from tests.harness import serve

    tmp = tmp_path_factory.mktemp("sqlite-api")
    url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
    upgrade_to_head(url)
    with serve(_settings(tmp, url), embedder=embedder) as server:  # type: ignore[arg-type]
        yield server
