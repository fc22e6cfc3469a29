"""Alembic environment: async engine, URL from the caller (engram migrate) or from Settings."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from app.db import Base, create_engine
from app.models import load_all_models

load_all_models()
target_metadata = Base.metadata


def _url() -> str:
    url = context.config.attributes.get("database_url") or context.config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from app.settings import get_settings

    return get_settings().resolved_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
