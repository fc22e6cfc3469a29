"""What a push may make an edge store and do: bounded by the plan and per memory, whatever the batch carries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from app.accounts.principal import Principal
from app.errors import QuotaExceeded
from app.memories.models import MemoryEvent, MemoryRecord
from app.sync.models import MemoryChange
from app.sync.protocol import MAX_BATCH, ChangeWire, PushIn, PushOut
from tests.sync.conftest import Node, node_settings, open_node
from tests.sync.test_apply import change

FIVE = {"free": {"requests_per_minute": 10**6, "key_requests_per_minute": 10**6, "max_memories": 5}}


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None: the node's own SQLite file; else a PostgreSQL database of its own (what a hosted edge runs on)."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("fresh_pg_url")
    return url


@asynccontextmanager
async def edge_on(tmp_path: Path, database_url: str | None, embedder: Any, **overrides: Any) -> AsyncIterator[Node]:
    async with open_node(node_settings(tmp_path, database_url, plans=FIVE, **overrides), embedder) as node:
        yield node


async def push(node: Node, who: Principal, changes: list[ChangeWire], node_id: str = "n_a") -> PushOut:
    assert node.sync.edge is not None
    return await node.sync.edge.push(who, PushIn(node_id=node_id, changes=changes))


async def stored_rows(node: Node) -> tuple[int, int, int]:
    """Rows in memories, memory_events and the change log, every tenant's."""
    async with node.container.db.session() as session:
        counts = [
            (await session.execute(select(func.count()).select_from(table))).scalar_one()
            for table in (MemoryRecord, MemoryEvent, MemoryChange)
        ]
    return counts[0], counts[1], counts[2]


@pytest.mark.anyio
async def test_deletes_of_memories_the_edge_never_had_store_nothing_and_do_not_count(
    tmp_path: Path, database_url: str | None, embedder: Any
) -> None:
    async with edge_on(tmp_path, database_url, embedder) as edge:
        who = await edge.user()
        before = await stored_rows(edge)
        long_text = "a tombstone carries the whole last record " * 40
        for _ in range(3):
            tombstones = [change(str(uuid.uuid4()), 1, "n_a", "delete", long_text) for _ in range(MAX_BATCH)]
            result = await push(edge, who, tombstones)
            assert result == PushOut(accepted=MAX_BATCH, applied=0, unchanged=0, conflicts=0, discarded=MAX_BATCH)
        # Made and deleted in one batch: the newest version is the delete, and the older write loses to it.
        made_and_deleted = [str(uuid.uuid4()) for _ in range(MAX_BATCH // 2)]
        pairs = [
            change(mid, v, "n_a", op, long_text) for mid in made_and_deleted for v, op in ((1, "upsert"), (2, "delete"))
        ]
        result = await push(edge, who, pairs)
        assert (result.applied, result.discarded) == (0, MAX_BATCH)
        assert await stored_rows(edge) == before, "no memory, no event, no log entry"

        # The plan's five memories are all still free, and a sixth is refused with nothing stored.
        five = [change(str(uuid.uuid4()), 1, "n_a", content=f"memory {n}") for n in range(5)]
        assert (await push(edge, who, five)).applied == 5
        with pytest.raises(QuotaExceeded):
            await push(edge, who, [change(str(uuid.uuid4()), 1, "n_a", content="one too many")])
        assert len(await edge.records(who.user_id)) == 5
        # A delete of a memory the edge has is a delete like any other: it stays as a tombstone, and frees room.
        assert (await push(edge, who, [change(five[0].memory_id, 2, "n_a", "delete", "memory 0")])).applied == 1
        [deleted] = [r for r in await edge.records(who.user_id) if r.deleted_at is not None]
        assert deleted.id == five[0].memory_id
        assert (await push(edge, who, [change(str(uuid.uuid4()), 1, "n_a", content="room again")])).applied == 1
