"""Rules that held in the code but that no test noticed being broken (a mutation check found them): each pinned here.

- update and delete by id in session mode reach only what that agent may read (MemoryService._readable);
- topics count only readable tags (repository.tags_of);
- a write whose database transaction fails takes back what it indexed (MemoryService._unindex);
- start-up repair re-indexes what the index lacks and purges what no row backs (MemoryService.repair).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.migrate import upgrade_to_head
from tests.conftest import PG_HOST, PG_PORT, PG_USER, _admin_execute, _settings
from tests.harness import RunningServer, free_port, make_account, serve
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_tools import error_text, structured
from tests.memories.legacy_index import with_shared_token_ids


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_in_session_mode_update_and_delete_by_id_stop_at_the_session(api: RunningServer) -> None:
    me = make_account(api)
    async with (
        connect(api, me.key, session_id(me.user_id, "alpha", "a")) as alpha,
        connect(api, me.key, session_id(me.user_id, "beta", "b")) as beta,
    ):
        added = structured(await alpha.call_tool("add_memories", {"memories": [{"content": "alpha's own plan"}]}))
        memory_id = added["results"][0]["id"]
        # The same user, another session: the id is as unknown there as another tenant's.
        changed = await beta.call_tool("update_memory", {"memory_id": memory_id, "content": "overwritten by beta"})
        assert "no memory" in error_text(changed)
        deleted = await beta.call_tool("delete_memories", {"memory_ids": [memory_id]})
        assert "no memory" in error_text(deleted)
        mine = structured(await alpha.call_tool("list_memories", {}))
    assert [(m["id"], m["content"]) for m in mine["memories"]] == [(memory_id, "alpha's own plan")]


@pytest.mark.anyio
async def test_topics_count_only_the_tags_the_caller_may_read(api: RunningServer) -> None:
    me = make_account(api)
    async with (
        connect(api, me.key, session_id(me.user_id, "alpha", "a")) as alpha,
        connect(api, me.key, session_id(me.user_id, "beta", "x")) as beta_x,
        connect(api, me.key, session_id(me.user_id, "beta", "y")) as beta_y,
    ):
        await alpha.call_tool("add_memories", {"memories": [{"content": "alpha fact", "tags": ["alpha-only"]}]})
        x_memories = [
            {"content": "x's note", "tags": ["x-only"], "scope": "agent"},
            {"content": "for every session", "tags": ["shared"], "scope": "user"},
            {"content": "for beta", "tags": ["beta"]},
        ]
        await beta_x.call_tool("add_memories", {"memories": x_memories})
        topics = structured(await beta_y.call_tool("list_topics", {}))["topics"]
    assert sorted(t["tag"] for t in topics) == ["beta", "shared"]
    with api.client(me.key) as http:
        rest = http.get("/v1/topics", params={"session": "beta", "agent": "y"}).json()["topics"]
    assert sorted(t["tag"] for t in rest) == ["beta", "shared"]


@pytest.fixture
def own_database(pg_server: str, embedder: Any, tmp_path: Path) -> Iterator[tuple[RunningServer, str]]:
    """A server on a PostgreSQL database of its own, which the test may make read-only under it."""
    name = f"engram_ro_{uuid.uuid4().hex[:10]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    upgrade_to_head(url)
    try:
        with serve(_settings(tmp_path, url), embedder=embedder) as server:  # type: ignore[arg-type]
            yield server, name
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _read_only(name: str, on: bool) -> None:
    """Turn the database read-only (or back) for every new connection, and end the open ones so the pools reconnect."""
    value = "on" if on else "off"
    _admin_execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = {value}')
    _admin_execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")


def test_a_write_whose_transaction_fails_leaves_nothing_in_the_index(own_database: tuple[RunningServer, str]) -> None:
    server, name = own_database
    me = make_account(server)
    with server.client(me.key) as http:
        assert http.post("/v1/memories", json={"content": "the warm-up memory"}).status_code == 201
        _read_only(name, True)
        try:
            # The index takes it first (mem0 picks the id), then the database refuses the transaction.
            batch = {"memories": [{"content": "the zebra migration ledger"}, {"content": "the yak shearing rota"}]}
            for _ in range(3):  # a pooled connection may die first (terminated): the next one is read-only
                failed = http.post("/v1/memories", json=batch)
                if failed.status_code >= 500:
                    break
            assert failed.status_code >= 500, failed.text
        finally:
            _read_only(name, False)
        deadline = time.monotonic() + 30
        while True:  # the pools find their connections gone once more, then work again
            try:
                found = http.post("/v1/memories/search", json={"query": "zebra migration ledger", "threshold": 0})
            except httpx.HTTPError:
                found = None
            if found is not None and found.status_code == 200:
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        listed = http.get("/v1/memories").json()["memories"]
    assert [m["content"] for m in listed] == ["the warm-up memory"]
    assert [r["content"] for r in found.json()["results"]] == ["the warm-up memory"]


def test_start_up_repair_reindexes_what_is_missing_and_purges_orphans(embedder: Any, tmp_path: Path) -> None:
    from app.memories.engine import MemoryEngine
    from app.memories.points import IndexedMemory

    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp_path, url)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        me = make_account(server)
        with server.client(me.key) as http:
            kept = http.post("/v1/memories", json={"content": "the harbour crane schedule"}).json()
            lost = http.post("/v1/memories", json={"content": "the lighthouse battery swap"}).json()

    # While the server is down, the index loses one memory and gains a point that no database row backs.
    orphan_id = str(uuid.uuid4())

    async def tamper() -> None:
        engine = await asyncio.to_thread(lambda: MemoryEngine.open(data_dir=tmp_path, embedder=embedder))
        try:
            await engine.purge([lost["id"]])
            orphan = IndexedMemory(
                orphan_id,
                me.user_id,
                "user",
                "user",
                None,
                None,
                "the phantom orchard ledger",
                [],
                {},
                kept["created_at"],
            )
            await engine.upsert([orphan])
            assert {lost["id"], orphan_id} & await engine.ids(user_id=me.user_id) == {orphan_id}
        finally:
            await asyncio.to_thread(engine.close)

    asyncio.run(tamper())
    settings.port = free_port()
    with serve(settings, embedder=embedder) as server, server.client(me.key) as http:  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while True:  # repair runs in the background while the server already serves
            hits = http.post("/v1/memories/search", json={"query": "lighthouse battery", "threshold": 0}).json()
            phantom = http.post("/v1/memories/search", json={"query": "phantom orchard ledger", "threshold": 0}).json()
            ids = {r["id"] for r in hits["results"]} | {r["id"] for r in phantom["results"]}
            if lost["id"] in ids and orphan_id not in ids:
                break
            assert time.monotonic() < deadline, f"repair did not converge: {ids}"
            time.sleep(0.2)


def test_start_up_rewrites_lexical_vectors_an_older_scheme_wrote(embedder: Any, tmp_path: Path) -> None:
    # An index from before tenant-scoped token ids: its words match no query of today's until start-up rewrites it.
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp_path, url)
    notes = ["ZX-4471: login crashes on Safari", "Ticket updates are posted in the ops channel", "Status is green"]

    def scores(http: httpx.Client) -> dict[str, float]:
        hits = http.post("/v1/memories/search", json={"query": "ZX-4471 Safari", "threshold": 0}).json()["results"]
        return {hit["content"]: hit["score"] for hit in hits}

    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        me = make_account(server)
        with server.client(me.key) as http:
            for text in notes:
                http.post("/v1/memories", json={"content": text}).raise_for_status()
            before = scores(http)
    assert with_shared_token_ids(tmp_path / "qdrant-edge" / "engram_memories", tmp_path) == 3

    settings.port = free_port()
    with serve(settings, embedder=embedder) as server, server.client(me.key) as http:  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while (now := scores(http)) != pytest.approx(before, abs=1e-5):  # rewritten while the server serves
            assert time.monotonic() < deadline, f"lexical vectors not rewritten: {now} against {before}"
            time.sleep(0.2)
