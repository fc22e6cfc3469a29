"""An edge serves the pulls that follow a push from the changes it kept as sent: the same changes, read or not."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from app.accounts.principal import Principal
from app.memories.schemas import MemoryPatch
from app.sync.edge import EdgeSync
from app.sync.outbox import pull_page
from app.sync.protocol import ChangeWire, Cursor, PushIn
from app.sync.recent import RecentChanges
from tests.sync.conftest import Node, node_settings, open_node
from tests.sync.test_apply import change


def parsed(changes: list[Any]) -> list[ChangeWire]:
    """As a receiver takes them (which also checks each is valid)."""
    return [ChangeWire.model_validate(c) for c in changes]


async def pushed_batch(node: Node, embedder: Any) -> tuple[list[ChangeWire], dict[str, str]]:
    """A batch of every kind: shipped vectors, a vector of another model, none, a tombstone (of the memory
    ``push_what_it_deletes`` brings first), a private role memory."""
    model = node.container.engine.model_id
    ids = {name: str(uuid.uuid4()) for name in ("shipped", "foreign", "bare", "gone", "private")}

    def vector(text: str) -> list[float]:
        return list(embedder.embed(text))

    batch = [
        change(ids["shipped"], 1, "n_a", content="deploys go out on Tuesdays", vector=vector("deploys"), model=model),
        change(ids["foreign"], 1, "n_a", content="the cache is warmed at boot", vector=vector("x"), model="other/384"),
        change(ids["bare"], 1, "n_a", content="the staging database is shared"),
        change(ids["gone"], 2, "n_a", "delete", content="an old note"),
        change(
            ids["private"], 1, "n_a", content="review checklist", scope="role", role="reviewer", session="s1",
            agent="a1", visibility="private", vector=vector("review checklist"), model=model,
        ),
    ]  # fmt: skip
    return batch, ids


async def push_what_it_deletes(sync: EdgeSync, who: Principal, ids: dict[str, str]) -> None:
    """The memory the batch's tombstone deletes, pushed before it: the delete of one the edge never had is discarded."""
    await sync.push(who, PushIn(node_id="n_a", changes=[change(ids["gone"], 1, "n_a", content="an old note")]))


async def pushed(edge: Node, embedder: Any) -> tuple[Principal, EdgeSync, dict[str, str]]:
    """A user of ``edge`` who has just pushed ``pushed_batch`` to it."""
    who = await edge.user()
    sync = edge.sync.edge
    assert sync is not None and sync.recent is not None
    batch, ids = await pushed_batch(edge, embedder)
    await push_what_it_deletes(sync, who, ids)
    await sync.push(who, PushIn(node_id="n_a", changes=batch))
    return who, sync, ids


@pytest.mark.anyio
async def test_a_pull_after_a_push_sends_what_reading_the_memories_back_would(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as edge:
        who, sync, ids = await pushed(edge, embedder)
        assert sync.recent is not None

        served = await sync.pull(who, cursor=None, limit=100, wait=0, node="n_b")
        db, engine = edge.container.db, edge.container.engine
        read_back = await pull_page(db, engine, who.user_id, None, "n_b", limit=100)
        assert parsed(served["changes"]) == parsed(read_back.changes)
        assert {c.memory_id for c in parsed(served["changes"])} == set(ids.values())
        # Kept: the shipped vectors (sent on as they came) and the tombstone. Read back: the two the edge embedded.
        assert (sync.recent.hits, sync.recent.misses) == (3, 2)
        by_id = {c.memory_id: c for c in parsed(served["changes"])}
        assert by_id[ids["foreign"]].vector is not None and by_id[ids["foreign"]].vector.model == engine.model_id
        assert by_id[ids["gone"]].op == "delete" and by_id[ids["gone"]].vector is None
        assert by_id[ids["private"]].record.visibility == "private"


@pytest.mark.anyio
async def test_a_kept_change_is_not_sent_once_its_memory_has_moved_on(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as edge:
        who, sync, ids = await pushed(edge, embedder)
        await edge.container.memories.update(who, None, ids["shipped"], MemoryPatch(content="deploys: Thursdays now"))

        served = parsed((await sync.pull(who, cursor=None, limit=100, wait=0, node="n_b"))["changes"])
        [edited] = [c for c in served if c.memory_id == ids["shipped"]]
        assert edited.record.content == "deploys: Thursdays now" and edited.origin == edge.sync.node_id
        read_back = await pull_page(edge.container.db, edge.container.engine, who.user_id, None, "n_b", limit=100)
        assert served == parsed(read_back.changes)


@pytest.mark.anyio
async def test_kept_changes_stay_within_their_budget_and_a_pull_past_it_reads_them_back(
    tmp_path: Path, embedder: Any
) -> None:
    async with open_node(node_settings(tmp_path), embedder) as edge:
        who, other = await edge.user(), await edge.user()
        sync = edge.sync.edge
        assert sync is not None
        # Room for about two changes of a 384-dimension vector (2 KB of base64 and 1 KB for the rest).
        sync.recent = RecentChanges(max_bytes=7_000)
        model = edge.container.engine.model_id
        batch = [
            change(str(uuid.uuid4()), 1, "n_a", content=f"note {i}", vector=list(embedder.embed(f"n{i}")), model=model)
            for i in range(6)
        ]
        await sync.push(who, PushIn(node_id="n_a", changes=batch))
        assert len(sync.recent) == 2 and sync.recent.size <= 7_000

        served = parsed((await sync.pull(who, cursor=None, limit=100, wait=0, node="n_b"))["changes"])
        assert sorted(c.record.content for c in served) == [f"note {i}" for i in range(6)]
        assert (sync.recent.hits, sync.recent.misses) == (2, 4), "the last two pushed are kept"
        # Keys carry the user: another tenant's pull never takes them (it sees none of these memories anyway).
        assert (await sync.pull(other, cursor=None, limit=100, wait=0, node="n_b"))["changes"] == []
        assert sync.recent.hits == 2


@pytest.mark.anyio
async def test_an_edge_that_keeps_nothing_still_serves_every_pull(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path, sync_pull_cache_bytes=0), embedder) as edge:
        who, sync, ids = await pushed(edge, embedder)
        assert sync.recent is not None
        served = parsed((await sync.pull(who, cursor=None, limit=100, wait=0, node="n_b"))["changes"])
        assert {c.memory_id for c in served} == set(ids.values())
        assert (len(sync.recent), sync.recent.hits) == (0, 0)


@pytest.mark.anyio
async def test_pulls_page_through_the_log_with_kept_and_read_changes_in_order(tmp_path: Path, embedder: Any) -> None:
    async with open_node(node_settings(tmp_path), embedder) as edge:
        who = await edge.user()
        sync = edge.sync.edge
        assert sync is not None
        batch, ids = await pushed_batch(edge, embedder)
        await push_what_it_deletes(sync, who, ids)
        start = await sync.pull(who, cursor=None, limit=10, wait=0, node="n_b")
        while start["more"]:
            start = await sync.pull(who, cursor=start["cursor"], limit=10, wait=0, node="n_b")
        cursor = start["cursor"]
        assert Cursor.decode(cursor) is not None
        await sync.push(who, PushIn(node_id="n_a", changes=batch))
        local = await edge.add(who, "written on the edge itself")

        pages = []
        while True:
            page = await sync.pull(who, cursor=cursor, limit=2, wait=0, node="n_b")
            pages.append(parsed(page["changes"]))
            cursor = page["cursor"]
            if not page["more"]:
                break
        sent = [c.memory_id for page in pages for c in page]
        log = [row.memory_id for row in await edge.log(who.user_id)][1:]  # after what was pulled at the start
        assert sent == list(dict.fromkeys(log)), "in log order, each memory once"
        assert sent[-1] == local
