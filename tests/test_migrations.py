"""The same migrations run forward and back on SQLite and PostgreSQL, and match the models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from alembic import command

from app.migrate import alembic_config, upgrade_to_head


def _tables(url: str) -> set[str]:
    from sqlalchemy import inspect

    from app.db import create_engine

    async def read() -> set[str]:
        engine = create_engine(url)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        await engine.dispose()
        return names

    return asyncio.run(read())


def _round_trip(url: str) -> None:
    upgrade_to_head(url)
    assert {"users", "api_keys", "memories", "memory_events"} <= _tables(url)
    command.downgrade(alembic_config(url), "base")
    assert _tables(url) <= {"alembic_version"}
    upgrade_to_head(url)
    assert {"users", "api_keys", "memories", "memory_events"} <= _tables(url)


def test_migrations_round_trip_on_sqlite(tmp_path: Path) -> None:
    _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_migrations_round_trip_on_postgres(pg_server: str) -> None:
    import uuid

    from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute

    name = f"engram_mig_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        _round_trip(f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_models_and_migrations_agree(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine

    from app.db import Base
    from app.models import load_all_models

    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    upgrade_to_head(url)
    load_all_models()
    engine = create_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


@pytest.mark.postgres
def test_models_and_migrations_agree_on_postgres(pg_server: str) -> None:
    """Types differ between the two (64-bit ids are BIGINT here, INTEGER on SQLite): PostgreSQL is compared too."""
    import uuid

    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import Connection, text

    from app.db import Base, create_engine
    from app.models import load_all_models
    from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute

    def compare(conn: Connection) -> tuple[list[object], dict[str, str]]:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        rows = conn.execute(text("SELECT sequencename, data_type::text FROM pg_sequences")).all()
        return diff, {str(name): str(kind) for name, kind in rows}

    async def read(url: str) -> tuple[list[object], dict[str, str]]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(compare)
        finally:
            await engine.dispose()

    name = f"engram_cmp_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        upgrade_to_head(url)
        load_all_models()
        diff, sequences = asyncio.run(read(url))
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert diff == []
    # A serial's sequence has a type of its own: an integer one would stop at 2**31 - 1 under a BIGINT column.
    assert sequences["memory_events_id_seq"] == sequences["session_messages_id_seq"] == "bigint"
