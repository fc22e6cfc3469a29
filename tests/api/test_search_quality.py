"""Retrieval quality over real HTTP: hybrid search, neighbour context, the default threshold, the index upgrade.

Small, made-up memories: each test fails if the part of the search it names breaks (the LoCoMo data is for
bench/quality.py only)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import RunningServer, make_account, serve
from tests.mcp.conftest import connect
from tests.mcp.test_tools import structured

TICKETS = [
    "What is the status of the release ticket?",
    "Ticket updates are posted in the ops channel",
    "Every ticket gets a priority label",
    "Open tickets are reviewed every Monday",
    "The deployment status is green",
]
TARGET = "ZX-4471 (ticket): login crashes on Safari since the status bar update"


def _search(http: httpx.Client, query: str, **extra: Any) -> list[dict[str, Any]]:
    response = http.post("/v1/memories/search", json={"query": query, **extra})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_a_lexical_match_that_meaning_alone_misses_comes_first(sqlite_api: RunningServer) -> None:
    # The target comes last: written in one stretch, each memory is indexed with the words of the one before it.
    me = make_account(sqlite_api)
    with sqlite_api.client(me.key) as http:
        stored = http.post("/v1/memories", json={"memories": [{"content": t} for t in [*TICKETS, TARGET]]})
        assert stored.status_code == 201, stored.text
        found = _search(http, "what is the status of ticket ZX-4471?", limit=3)
    assert found[0]["content"] == TARGET
    assert 0 < found[0]["score"] <= 1


def test_the_default_threshold_drops_unrelated_memories(sqlite_api: RunningServer) -> None:
    me = make_account(sqlite_api)
    with sqlite_api.client(me.key) as http:
        contents = ["The user is allergic to peanuts", "We deploy the API with fly.io", "The cat is named Miso"]
        assert http.post("/v1/memories", json={"memories": [{"content": c} for c in contents]}).status_code == 201
        assert _search(http, "what is the weather like in Paris?") == []
        assert _search(http, "peanut allergy")[0]["content"] == contents[0]
        assert _search(http, "pets")[0]["content"] == contents[2]  # related by meaning alone, still found
        everything = _search(http, "what is the weather like in Paris?", threshold=0)
        assert sorted(r["content"] for r in everything) == sorted(contents)
        strict = _search(http, "peanut allergy", threshold=0.9)
        assert strict == []
        bad = http.post("/v1/memories/search", json={"query": "x", "threshold": 1.5})
        assert bad.status_code == 422


def test_a_reply_is_found_through_the_memory_written_before_it(sqlite_api: RunningServer) -> None:
    reply = "Mostly charades and a scavenger hunt, we laughed a lot"
    scores = {}
    for before in ("What games did you play at the church picnic?", None):
        me = make_account(sqlite_api)
        with sqlite_api.client(me.key) as http:
            if before is not None:  # written one request earlier: the server finds it in the record
                assert http.post("/v1/memories", json={"content": before}).status_code == 201
            assert http.post("/v1/memories", json={"content": reply}).status_code == 201
            assert http.post("/v1/memories", json={"content": "We bought a new grill"}).status_code == 201
            hits = {r["content"]: r["score"] for r in _search(http, "church picnic games", threshold=0)}
        scores[before is not None] = hits[reply]
    assert scores[True] > scores[False] + 0.1


@pytest.mark.anyio
async def test_mcp_search_memory_is_the_same_search(sqlite_api: RunningServer) -> None:
    me = make_account(sqlite_api)
    async with connect(sqlite_api, me.key, me.user_id) as client:
        structured(await client.call_tool("add_memories", {"memories": [{"content": t} for t in [*TICKETS, TARGET]]}))
        hits = structured(await client.call_tool("search_memory", {"query": "status of ticket ZX-4471", "limit": 3}))
        assert hits["results"][0]["content"] == TARGET
        nothing = structured(await client.call_tool("search_memory", {"query": "the weather in Paris"}))
        assert nothing["results"] == []
        everything = structured(
            await client.call_tool("search_memory", {"query": "the weather in Paris", "threshold": 0})
        )
        assert len(everything["results"]) == 6


def _make_dense_only(data_dir: Path, records: list[tuple[str, str, str]], embedder: Any) -> None:
    """Replace the embedded index with one laid out as before hybrid search: the dense vector alone."""
    import shutil

    import qdrant_edge as qe

    shard_path = data_dir / "qdrant-edge" / "engram_memories"
    shutil.rmtree(shard_path)
    shard_path.mkdir()
    config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=embedder.dims, distance=qe.Distance.Cosine))
    shard = qe.EdgeShard.create(str(shard_path), config)
    points = [
        qe.Point(memory_id, embedder.embed(content), {"data": content, "user_id": user_id, "visibility": "user"})
        for memory_id, user_id, content in records
    ]
    shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()


def test_a_server_upgrades_a_dense_only_index_by_itself(tmp_path: Path, embedder: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp_path, url)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        me = make_account(server)
        with server.client(me.key) as http:
            stored = http.post("/v1/memories", json={"memories": [{"content": t} for t in [*TICKETS, TARGET]]})
            assert stored.status_code == 201
            records = [(m["id"], me.user_id, m["content"]) for m in stored.json()["results"]]
    _make_dense_only(tmp_path, records, embedder)

    with serve(settings, embedder=embedder) as server, server.client(me.key) as http:  # type: ignore[arg-type]
        assert server.container.engine.rebuilt
        deadline = time.monotonic() + 60
        while True:  # start-up repair refills the index in the background
            found = _search(http, "what is the status of ticket ZX-4471?", limit=3)
            if found and found[0]["content"] == TARGET:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.1)
        assert len(_search(http, "ticket status", threshold=0)) == 6
