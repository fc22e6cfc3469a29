"""What is sent: pull pages (a snapshot, then the log in commit order) and push batches, and the commit-order rule."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.memories.schemas import MemoryPatch
from app.sync.backlog import PushPosition, pending
from app.sync.changelog import hold_commit_order
from app.sync.models import MemoryChange, SyncLink
from app.sync.outbox import CursorAhead, PullPage, PushBatch, next_push, pull_page
from app.sync.protocol import ChangeWire, Cursor
from app.sync.worker import LinkRunner
from tests.sync.conftest import node_settings, open_node
from tests.sync.test_apply import change, received


def wire(page: PullPage | PushBatch) -> list[ChangeWire]:
    """What a receiver takes from a page or batch: each change as it parses it (which also checks it is valid)."""
    return [ChangeWire.model_validate(c) for c in page.changes]


@pytest.mark.anyio
async def test_a_pull_starts_with_every_memory_then_follows_the_log_without_the_pullers_own(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as edge:
        alice, bob = await edge.user(), await edge.user()
        kept = await edge.add(alice, "kept")
        dropped = await edge.add(alice, "dropped")
        await edge.container.memories.delete(alice, None, [dropped])
        await edge.add(bob, "bob's")
        db, engine, user = edge.container.db, edge.container.engine, alice.user_id

        first = await pull_page(db, engine, user, None, "n_puller", limit=1)
        assert [c.memory_id for c in wire(first)] == [min(kept, dropped)] and first.more
        rest = await pull_page(db, engine, user, first.cursor, "n_puller", limit=10)
        snapshot = {c.memory_id: c for c in wire(first) + wire(rest)}
        assert set(snapshot) == {kept, dropped}, "only alice's, deleted ones as tombstones"
        assert snapshot[dropped].op == "delete" and snapshot[kept].op == "upsert"
        assert snapshot[kept].vector is not None and snapshot[kept].vector.model == engine.model_id
        assert snapshot[dropped].vector is None
        caught_up = await pull_page(db, engine, user, rest.cursor, "n_puller", limit=10)
        assert wire(caught_up) == [] and not caught_up.more

        await edge.container.memories.update(alice, None, kept, MemoryPatch(content="kept, edited"))
        mine = str(uuid.uuid4())
        await edge.sync.applier.apply(user, received(edge, [change(mine, 1, "n_puller", content="the puller's")]))
        news = await pull_page(db, engine, user, caught_up.cursor, "n_puller", limit=10)
        assert [(c.memory_id, c.record.content) for c in wire(news)] == [(kept, "kept, edited")]
        others = await pull_page(db, engine, user, caught_up.cursor, "n_other", limit=10)
        assert [c.memory_id for c in wire(others)] == [kept, mine], "the edge passes a node's change on"

        with pytest.raises(CursorAhead):
            await pull_page(db, engine, user, Cursor(news.cursor.seq + 100), "n_puller", limit=10)


@pytest.mark.anyio
async def test_a_push_sends_every_memory_then_the_log_but_not_what_its_link_brought(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as node:
        alice = await node.user()
        before = [await node.add(alice, f"before link {i}") for i in range(3)]
        db, engine = node.container.db, node.container.engine
        async with db.session() as session:
            horizon = PushPosition(max(c.seq for c in await node.log()), after="")
            assert await pending(session, alice.user_id, "lnk_1", horizon) == 3
        after_link = await node.add(alice, "after link")
        pulled = str(uuid.uuid4())
        await node.sync.applier.apply(
            alice.user_id, received(node, [change(pulled, 1, "n_edge", content="pulled")]), source="lnk_1"
        )
        sent: list[str] = []
        position = horizon
        while True:
            batch = await next_push(db, engine, alice.user_id, "lnk_1", position, limit=2)
            sent += [c.memory_id for c in wire(batch)]
            position = batch.position
            if batch.drained:
                break
        # The snapshot (every memory, the pulled one too: harmless), then from the log only the local write.
        assert sorted(sent[:5]) == sorted([*before, after_link, pulled])
        assert sent[5:] == [after_link]
        async with db.session() as session:
            assert await pending(session, alice.user_id, "lnk_1", position) == 0


@pytest.mark.anyio
@pytest.mark.postgres
async def test_log_positions_are_taken_in_commit_order_on_postgres(
    tmp_path: Path, embedder: Any, fresh_pg_url: str
) -> None:
    """A transaction that appends first holds the next one back until it has committed: no reader can see a later
    position without every earlier one."""
    async with open_node(node_settings(tmp_path, fresh_pg_url), embedder) as node:
        alice = await node.user()
        db = node.container.db

        def row(memory_id: str) -> MemoryChange:
            return MemoryChange(
                user_id=alice.user_id, memory_id=memory_id, op="upsert", hlc=1, origin="n_t", writer="w_t"
            )

        first_ready, release_first = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with db.session() as session:
                await session.run_sync(hold_commit_order)
                session.add(row("first"))
                await session.flush()
                first_ready.set()
                await release_first.wait()

        async def second() -> None:
            async with db.session() as session:
                await session.run_sync(hold_commit_order)
                session.add(row("second"))

        async def visible() -> list[str]:
            async with db.session() as session:
                result = await session.execute(text("SELECT memory_id FROM memory_changes ORDER BY seq"))
                return [r[0] for r in result]

        async def waiting_on_a_lock() -> bool:
            async with db.session() as session:
                result = await session.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock'"
                    )
                )
                return int(result.scalar_one()) > 0

        holder = asyncio.create_task(first())
        await first_ready.wait()
        follower = asyncio.create_task(second())
        async with asyncio.timeout(30):
            while not await waiting_on_a_lock():
                assert not follower.done(), "the second transaction committed while the first was still open"
                await asyncio.sleep(0.01)
        assert await visible() == []
        release_first.set()
        await asyncio.gather(holder, follower)
        assert await visible() == ["first", "second"]


@pytest.mark.anyio
async def test_a_batch_read_ahead_is_sent_only_from_where_the_link_is(tmp_path: Path, embedder: Any) -> None:
    # While the edge applies a batch the runner reads the next one; if that push fails, the link has not moved
    # and the batch read ahead (from past it) must not be sent in place of the one that failed.
    async with open_node(node_settings(tmp_path, sync_batch_size=2), embedder) as node:
        alice = await node.user()
        for i in range(5):
            await node.add(alice, f"note {i}")
        link = SyncLink(id="lnk_1", edge_url="http://127.0.0.1:9", local_user_id=alice.user_id)
        async with httpx.AsyncClient() as http:
            runner = LinkRunner(node.sync.worker.context, link, http)
            start = PushPosition(0)
            first = await runner.read_push(start)
            second = await runner.read_push(first.position)

            runner._ahead = (first.position, asyncio.ensure_future(runner._next_push(first.position)))
            again = await runner.read_push(start)  # the push of ``first`` failed: the link is still at ``start``
            assert wire(again) == wire(first) and runner._ahead is None
            runner._ahead = (first.position, asyncio.ensure_future(runner._next_push(first.position)))
            assert wire(await runner.read_push(first.position)) == wire(second), "taken when the link got there"
            runner._ahead = (second.position, asyncio.ensure_future(runner._next_push(second.position)))
            runner.discard_ahead()
            assert runner._ahead is None
