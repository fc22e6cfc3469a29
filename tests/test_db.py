"""The database plumbing's hot read path against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text

from app.db import Database
from app.errors import ValidationFailed
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


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("value", "says"),
    [("a\x00b", "NUL"), ("x" * 30, "longer than its field"), ("not json", "cannot store")],
)
def test_values_postgresql_refuses_are_a_validation_error_not_a_crash(
    scratch_pg: tuple[str, str], value: str, says: str
) -> None:
    _, url = scratch_pg

    async def run() -> None:
        db = Database(url)
        try:
            async with db.session() as session:
                await session.execute(text("CREATE TABLE t (short VARCHAR(20), doc JSONB, body TEXT)"))
            column = {"NUL": "body", "longer than its field": "short", "cannot store": "doc"}[says]
            insert = text(f"INSERT INTO t ({column}) VALUES (:v)")
            with pytest.raises(ValidationFailed, match=says):
                async with db.session() as session:
                    await session.execute(insert, {"v": value})
            with pytest.raises(ValidationFailed, match=says):
                await db.transact(lambda conn: conn.execute(insert, {"v": value}))
            if says != "longer than its field":  # comparing with a long value is fine; storing it is not
                with pytest.raises(ValidationFailed, match=says):
                    await db.first(
                        text(f"SELECT 1 FROM t WHERE {column} = CAST(:v AS {'JSONB' if column == 'doc' else 'TEXT'})"),
                        {"v": value},
                    )
        finally:
            await db.dispose()

    asyncio.run(run())


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_database_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """An empty SQLite file (transact's worker-thread path) or PostgreSQL database (its async-engine path)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/engram.db"
    else:
        yield request.getfixturevalue("scratch_pg")[1]


def test_transact_commits_what_its_work_did_and_returns_its_result(any_database_url: str) -> None:
    def write(conn: Connection) -> list[int]:
        inserted = conn.execute(text("INSERT INTO t (id, body) VALUES (1, 'one'), (2, 'two') RETURNING id"))
        return sorted(row[0] for row in inserted)

    async def run() -> tuple[list[int], list[tuple[int, str]]]:
        db = Database(any_database_url)
        try:
            async with db.session() as session:
                await session.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
            written = await db.transact(write)
            async with db.session() as session:
                rows = [(i, b) for i, b in (await session.execute(text("SELECT id, body FROM t ORDER BY id"))).all()]
            return written, rows
        finally:
            await db.dispose()

    written, rows = asyncio.run(run())
    assert written == [1, 2]
    assert rows == [(1, "one"), (2, "two")]


def test_transact_rolls_everything_back_when_its_work_raises(any_database_url: str) -> None:
    class Refused(Exception):
        pass

    def half_then_refuse(conn: Connection) -> None:
        conn.execute(text("INSERT INTO t (id, body) VALUES (1, 'half')"))
        raise Refused

    async def run() -> list[object]:
        db = Database(any_database_url)
        try:
            async with db.session() as session:
                await session.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
            with pytest.raises(Refused):
                await db.transact(half_then_refuse)
            async with db.session() as session:
                return list((await session.execute(text("SELECT id FROM t"))).all())
        finally:
            await db.dispose()

    assert asyncio.run(run()) == []


def test_a_database_wait_that_ran_out_is_told_as_503_and_nothing_else_is(tmp_path: object) -> None:
    """``busy_database``: SQLite's lock held past the busy timeout is the server at capacity (the error handlers
    answer 503 with it even where no ``bounded_waits`` was around the statement); other failures stay what they are."""
    import sqlite3

    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    from app.db import busy_database
    from app.errors import Overloaded

    path = f"{tmp_path}/locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    try:
        with pytest.raises(OperationalError) as locked, engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES (1)"))
        with pytest.raises(OperationalError) as missing, engine.begin() as conn:
            conn.execute(text("SELECT * FROM no_such_table"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        engine.dispose()
    refusal = busy_database(locked.value)
    assert isinstance(refusal, Overloaded) and refusal.headers == {"Retry-After": "1"}
    assert busy_database(missing.value) is None
    assert busy_database(ValueError("database is locked")) is None
