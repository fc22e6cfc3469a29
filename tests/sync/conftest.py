"""In-process nodes for the sync core's tests: a real database (SQLite or PostgreSQL), the real embedded index and
the real services, each node in a directory of its own. The multi-process tests start ``engram serve`` instead."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="engram-mem0-"))

import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.accounts import service as accounts
from app.accounts.principal import Principal, scopes_for
from app.container import Container
from app.memories.models import MemoryRecord
from app.memories.schemas import MemoryIn
from app.migrate import upgrade_to_head
from app.settings import Settings
from app.sync.models import MemoryChange
from app.sync.runtime import SyncRuntime


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Node:
    container: Container
    data_dir: Path

    @property
    def sync(self) -> SyncRuntime:
        assert self.container.sync is not None
        return self.container.sync

    async def user(self) -> Principal:
        async with self.container.db.session() as session:
            user = await accounts.create_user(session, f"{uuid.uuid4().hex[:12]}@example.test")
        return Principal(user.id, scopes_for("write"), key_id=None, via="test")

    async def add(self, who: Principal, content: str, **fields: Any) -> str:
        created = await self.container.memories.add(who, None, [MemoryIn(content=content, **fields)])
        return created[0].id

    async def records(self, user_id: str) -> list[MemoryRecord]:
        async with self.container.db.session() as session:
            query = select(MemoryRecord).where(MemoryRecord.user_id == user_id).order_by(MemoryRecord.id)
            return list((await session.execute(query)).scalars())

    async def log(self, user_id: str | None = None) -> list[MemoryChange]:
        async with self.container.db.session() as session:
            query = select(MemoryChange).order_by(MemoryChange.seq)
            if user_id is not None:
                query = query.where(MemoryChange.user_id == user_id)
            return list((await session.execute(query)).scalars())


def node_settings(data_dir: Path, database_url: str | None = None, **overrides: Any) -> Settings:
    data_dir.mkdir(parents=True, exist_ok=True)
    url = database_url or f"sqlite+aiosqlite:///{data_dir / 'engram.db'}"
    # Alembic runs its own event loop: on a thread of its own, so async tests may call this too.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(upgrade_to_head, url).result()
    overrides.setdefault("secret_key", "test-secret-" + uuid.uuid4().hex)
    return Settings(data_dir=data_dir, database_url=url, **overrides)


@asynccontextmanager
async def open_node(settings: Settings, embedder: Any) -> AsyncIterator[Node]:
    from app.assembly import build_container, close_container

    container = await build_container(settings, embedder)
    try:
        yield Node(container, settings.data_dir)
    finally:
        await close_container(container)


@pytest.fixture
def fresh_pg_url(pg_server: str) -> Any:
    """A PostgreSQL database of its own, migrated, dropped afterwards."""
    from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute

    name = f"engram_sync_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    upgrade_to_head(url)
    try:
        yield url
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
