"""Apply Alembic migrations programmatically (``engram migrate`` and the test fixtures)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(database_url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes["database_url"] = database_url
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the database at ``database_url`` to the newest revision."""
    if database_url.startswith("sqlite"):
        path = database_url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(database_url), "head")


def head_revision(database_url: str) -> str:
    """The newest revision this code knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    assert head is not None, "the migrations folder has no revisions"
    return head


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None: no tables yet)."""
    import asyncio

    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.ext.asyncio import create_async_engine

    async def current() -> str | None:
        engine = create_async_engine(database_url)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())
        finally:
            await engine.dispose()

    return asyncio.run(current())


def behind_head(database_url: str) -> str | None:
    """Why ``engram serve`` cannot use this database yet (None when it is at the newest revision)."""
    head = head_revision(database_url)
    found = current_revision(database_url)
    if found == head:
        return None
    state = "has no tables yet" if found is None else f"is at revision {found}, not {head}"
    return f"the database {state}: run `engram migrate` first (`make run` does both)"
