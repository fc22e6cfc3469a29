"""What a push may make an edge store and do: bounded by the plan and per memory, whatever the batch carries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.principal import Principal
from app.db import utcnow
from app.errors import Forbidden, QuotaExceeded
from app.memories.models import MemoryEvent, MemoryRecord
from app.sync.discards import DISCARDS_KEPT
from app.sync.models import DiscardedDelete, MemoryChange
from app.sync.protocol import MAX_BATCH, ChangeWire, PushIn, PushOut
from tests.sync.conftest import Node, node_settings, open_node
from tests.sync.test_apply import change, received

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


@pytest.mark.anyio
async def test_an_older_version_arriving_after_its_discarded_delete_does_not_bring_the_memory_back(
    tmp_path: Path, database_url: str | None, embedder: Any
) -> None:
    """A node's push with a memory's first version was slow; it timed out, and the retry (the memory deleted by then,
    so it sent only the delete) landed first, on another instance. The slow first attempt must lose to that delete."""
    async with edge_on(tmp_path, database_url, embedder) as edge:
        who, other = await edge.user(), await edge.user()
        memory_id, theirs = str(uuid.uuid4()), str(uuid.uuid4())
        retry = await push(edge, who, [change(memory_id, 2, "n_a", "delete", "draft")])
        assert (retry.applied, retry.discarded) == (0, 1)
        late = await push(edge, who, [change(memory_id, 1, "n_a", content="draft")])
        assert (late.applied, late.discarded) == (0, 1)
        assert await edge.records(who.user_id) == [], "the deleted memory stays deleted"
        assert await stored_rows(edge) == (0, 0, 0)

        # A newer version is a write like any other: it wins over the delete.
        again = await push(edge, who, [change(memory_id, 3, "n_a", content="written again")])
        assert again.applied == 1
        assert [r.content for r in await edge.records(who.user_id)] == ["written again"]

        # What one tenant's discarded deletes say never decides another's writes.
        assert (await push(edge, who, [change(theirs, 2, "n_a", "delete", "x")])).discarded == 1
        assert (await push(edge, other, [change(theirs, 1, "n_b", content="mine")])).applied == 1

        # The versions are kept for DISCARDS_KEPT only (a sender gave up on any attempt long before).
        forgotten = str(uuid.uuid4())
        assert (await push(edge, who, [change(forgotten, 2, "n_a", "delete", "x")])).discarded == 1
        async with edge.container.db.session() as session:
            await session.execute(
                update(DiscardedDelete)
                .where(DiscardedDelete.memory_id == forgotten)
                .values(discarded_at=utcnow() - DISCARDS_KEPT - timedelta(seconds=1))
            )
        assert (await push(edge, who, [change(forgotten, 1, "n_a", content="long after")])).applied == 1


async def conflicts_of(node: Node, who: Principal, memory_id: str) -> list[str | None]:
    """The losing texts a memory's history keeps, oldest first."""
    history = (await node.container.memories.history(who, None, memory_id)).history
    return [h.old_content for h in history if h.event == "CONFLICT"]


@pytest.mark.anyio
async def test_a_memory_keeps_only_its_newest_losing_versions(
    tmp_path: Path, database_url: str | None, embedder: Any
) -> None:
    async with edge_on(tmp_path, database_url, embedder, sync_max_conflicts_per_memory=5) as edge:
        who = await edge.user()
        memory = str(uuid.uuid4())
        await push(edge, who, [change(memory, 10_000, "n_w", content="the winner")])
        first = [change(memory, v, "n_b", content=f"loser {v}") for v in range(1, 301)]
        assert (await push(edge, who, first[::-1])).conflicts == 300
        assert await conflicts_of(edge, who, memory) == [f"loser {v}" for v in range(296, 301)]

        second = [change(memory, v, "n_c", content=f"loser {v}") for v in range(301, 601)]
        assert (await push(edge, who, second)).conflicts == 300
        assert await conflicts_of(edge, who, memory) == [f"loser {v}" for v in range(596, 601)], "the older went"
        late_delete = change(memory, 601, "n_d", "delete", "the winner")
        assert (await push(edge, who, [late_delete])).conflicts == 1
        kept = [*(f"loser {v}" for v in range(597, 601)), None]
        assert await conflicts_of(edge, who, memory) == kept
        await push(edge, who, [*second[-4:], late_delete])  # the kept ones sent again: recorded already
        await push(edge, who, [change(memory, 1_000, "n_e", content="the winner")])  # held already
        assert await conflicts_of(edge, who, memory) == kept
        [record] = await edge.records(who.user_id)
        assert record.content == "the winner"


async def with_long_history(node: Node, who: Principal, events: int) -> str:
    """A memory the edge holds, with ``events`` edits in its history before the losers come."""
    memory = str(uuid.uuid4())
    await push(node, who, [change(memory, 10_000, "n_w", content="the winner")])
    async with node.container.db.session() as session:
        session.add_all(
            MemoryEvent(memory_id=memory, user_id=who.user_id, event="UPDATE", old_content=f"edit {n}",
                        new_content=f"edit {n + 1}", actor="an earlier edit")
            for n in range(events)
        )  # fmt: skip
    return memory


@contextmanager
def statements(node: Node) -> Iterator[list[str]]:
    """The SQL statements the node's database runs meanwhile."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    engine = node.container.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def losers(memory: str, count: int) -> list[ChangeWire]:
    return [change(memory, v, "n_b", content=f"loser {v} of {memory}") for v in range(1, count + 1)]


@pytest.mark.anyio
async def test_losers_cost_a_push_the_same_few_statements_however_many_and_however_long_the_history(
    tmp_path: Path, database_url: str | None, embedder: Any
) -> None:
    async with edge_on(tmp_path, database_url, embedder) as edge:
        who = await edge.user()
        short, long = await with_long_history(edge, who, 20), await with_long_history(edge, who, 1_000)

        async def cost(memory: str, count: int) -> int:
            with statements(edge) as seen:
                assert (await push(edge, who, losers(memory, count))).conflicts == count
            return len(seen)

        ten = await cost(short, 10)
        assert ten < 20
        assert await cost(short, MAX_BATCH) == ten
        assert await cost(long, MAX_BATCH) == ten


@pytest.mark.anyio
async def test_losers_read_a_memorys_history_once_per_push_not_once_each(
    tmp_path: Path, fresh_pg_url: str, embedder: Any
) -> None:
    async with edge_on(tmp_path, fresh_pg_url, embedder) as edge:
        who = await edge.user()
        memory = await with_long_history(edge, who, 1_000)
        read: list[int] = []

        async def rows_read(session: AsyncSession) -> None:
            # What PostgreSQL read of memory_events in this transaction, by any scan.
            query = "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables WHERE relname = :t"
            read.append((await session.execute(text(query), {"t": "memory_events"})).scalar_one())

        batch = received(edge, losers(memory, MAX_BATCH))
        result = await edge.sync.applier.apply(who.user_id, batch, pushed=True, finish=rows_read)
        assert result.conflicts == MAX_BATCH
        assert read[0] < 10 * (1_000 + MAX_BATCH), "a few reads of the history and the batch, not one per loser"


@pytest.mark.anyio
async def test_a_push_never_touches_another_tenants_memory_even_a_deleted_one(
    tmp_path: Path, database_url: str | None, embedder: Any
) -> None:
    async with edge_on(tmp_path, database_url, embedder) as edge:
        alice, mallory = await edge.user(), await edge.user()
        live, deleted = str(uuid.uuid4()), str(uuid.uuid4())
        await push(edge, alice, [change(live, 1, "n_a", content="alice's plan"), change(deleted, 1, "n_a")])
        await push(edge, alice, [change(deleted, 2, "n_a", "delete", "alice's old secret")])
        before = [(r.id, r.content, r.deleted_at, r.hlc, r.origin) for r in await edge.records(alice.user_id)]
        log_before = len(await edge.log())
        for target in (live, deleted):
            for op in ("upsert", "delete"):
                with pytest.raises(Forbidden):
                    await push(edge, mallory, [change(target, 10**6, "n_m", op, "taken over")], node_id="n_m")
        assert [(r.id, r.content, r.deleted_at, r.hlc, r.origin) for r in await edge.records(alice.user_id)] == before
        assert await edge.records(mallory.user_id) == []
        assert len(await edge.log()) == log_before
        history = (await edge.container.memories.history(alice, None, deleted)).history
        assert [h.event for h in history] == ["ADD", "DELETE"]
