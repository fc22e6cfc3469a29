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
