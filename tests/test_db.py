"""The database plumbing's hot read path against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from app.db import Database
from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute


@pytest.fixture
def scratch_pg(pg_server: str) -> Iterator[tuple[str, str]]:
    """An empty database of its own, so killing its connections disturbs no other test's server."""
    name = f"engram_scratch_{uuid.uuid4().hex[:12]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_a_hot_read_survives_the_database_dropping_its_connections(scratch_pg: tuple[str, str]) -> None:
    name, url = scratch_pg
    backend_pid = text("SELECT pg_backend_pid()")

    async def run() -> tuple[int, int]:
        db = Database(url)
        try:
            before = await db.first(backend_pid)
            assert before is not None
            # What a restart or failover does to every pooled connection.
            await asyncio.to_thread(
                _admin_execute, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            )
            after = await db.first(backend_pid)
            assert after is not None
            return before[0], after[0]
        finally:
            await db.dispose()

    before, after = asyncio.run(run())
    assert before != after  # answered on a fresh connection, not an error
