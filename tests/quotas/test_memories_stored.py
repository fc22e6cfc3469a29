"""On SQLite, the number of live memories on each user's row, which the quota reads instead of counting, is kept by the
database: it equals a count of the user's live memories after every kind of write, and an upgrade fills it from the
memories already stored. (PostgreSQL counts: tests/quotas/test_quotas.py runs the quota on both.)"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import delete, func, insert, select, text, update

from app.accounts.models import User
from app.db import create_engine
from app.memories.models import MemoryRecord
from app.migrate import alembic_config, upgrade_to_head

NOW = datetime.now(UTC)


def _memory(user_id: str, *, deleted: bool = False) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "user_id": user_id,
        "scope": "user",
        "visibility": "user",
        "content": "a fact",
        "tags": [],
        "metadata": {},
        "created_at": NOW,
        "updated_at": NOW,
        "deleted_at": NOW if deleted else None,
    }


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    return url


async def _stored_and_counted(url: str, users: list[str]) -> list[tuple[int, int]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            out = []
            for user_id in users:
                stored = (await conn.execute(select(User.memories_stored).where(User.id == user_id))).scalar_one()
                counted = (
                    await conn.execute(
                        select(func.count()).where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))
                    )
                ).scalar_one()
                out.append((stored, counted))
            return out
    finally:
        await engine.dispose()


def test_the_stored_number_follows_every_kind_of_write(database_url: str) -> None:
    async def scenario() -> None:
        engine = create_engine(database_url)
        users = ["u_ada", "u_bob"]
        table = MemoryRecord.__table__
        try:
            async with engine.begin() as conn:
                await conn.execute(insert(User), [{"id": u, "email": f"{u}@example.test"} for u in users])
            # Live and tombstoned rows in one statement (imports and sync pushes write both).
            ada = [_memory("u_ada") for _ in range(5)] + [_memory("u_ada", deleted=True) for _ in range(2)]
            bob = [_memory("u_bob") for _ in range(3)]
            async with engine.begin() as conn:
                await conn.execute(insert(table), ada + bob)  # type: ignore[arg-type]
            assert await _stored_and_counted(database_url, users) == [(5, 5), (3, 3)]
            async with engine.begin() as conn:
                # Soft delete, a second soft delete of the same row (no change), a tombstone coming back to life.
                await conn.execute(update(table).where(table.c.id == ada[0]["id"]).values(deleted_at=NOW))
                await conn.execute(update(table).where(table.c.id == ada[0]["id"]).values(deleted_at=NOW))
                await conn.execute(update(table).where(table.c.id == ada[5]["id"]).values(deleted_at=None))
                # An edit that does not touch deletion leaves the number alone.
                await conn.execute(update(table).where(table.c.id == ada[1]["id"]).values(content="edited"))
            assert await _stored_and_counted(database_url, users) == [(5, 5), (3, 3)]
            async with engine.begin() as conn:
                # Hard deletes: a live row and a tombstone (purges, erasure).
                await conn.execute(delete(table).where(table.c.id.in_([ada[1]["id"], ada[6]["id"]])))
            assert await _stored_and_counted(database_url, users) == [(4, 4), (3, 3)]
            async with engine.begin() as conn:
                # A write that rolls back leaves the number as it was.
                await conn.execute(insert(table), [_memory("u_bob")])  # type: ignore[arg-type]
                await conn.rollback()
            assert await _stored_and_counted(database_url, users) == [(4, 4), (3, 3)]
            async with engine.begin() as conn:
                # Deleting a user takes its memories with it (ON DELETE CASCADE) and leaves the others' number.
                await conn.execute(delete(User).where(User.id == "u_ada"))
            assert await _stored_and_counted(database_url, ["u_bob"]) == [(3, 3)]
        finally:
            await engine.dispose()

    asyncio.run(scenario())


def test_an_upgrade_fills_the_number_from_the_memories_already_stored(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    command.upgrade(alembic_config(url), "0055_big_event_ids")

    async def before() -> None:
        engine = create_engine(url)
        try:
            async with engine.begin() as conn:
                # As that revision's users table has it (the model's has the new column).
                await conn.execute(
                    text("INSERT INTO users (id, email, plan, created_at) VALUES (:id, :email, 'free', :now)"),
                    [{"id": u, "email": f"{u}@example.test", "now": NOW} for u in ("u_a", "u_b")],
                )
                rows = [_memory("u_a") for _ in range(4)] + [_memory("u_a", deleted=True), _memory("u_b")]
                await conn.execute(insert(MemoryRecord.__table__), rows)  # type: ignore[arg-type]
        finally:
            await engine.dispose()

    asyncio.run(before())
    upgrade_to_head(url)
    assert asyncio.run(_stored_and_counted(url, ["u_a", "u_b"])) == [(4, 4), (1, 1)]
