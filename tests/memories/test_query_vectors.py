"""A repeated search skips the embedding model; entries belong to one tenant, stay bounded, and change no result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.memories.embedder import OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from app.memories.query_vectors import QueryVectors
from tests.memories.test_engine_contract import CountingEmbedder as Counting
from tests.memories.test_engine_contract import add

pytestmark = pytest.mark.anyio


@pytest.fixture
def counting(embedder: OnnxMiniLMEmbedder) -> Counting:
    return Counting(embedder)


@pytest.fixture
def engine(tmp_path: Path, counting: Counting) -> Iterator[MemoryEngine]:
    engine = MemoryEngine.open(data_dir=tmp_path, embedder=counting, query_cache_size=3)
    yield engine
    engine.close()


async def _search(engine: MemoryEngine, user_id: str, query: str) -> list[tuple[str, float]]:
    hits = await engine.search(user_id=user_id, query=query, visibilities=["user"], limit=5, threshold=0)
    return [(hit.id, hit.score) for hit in hits]


async def test_a_repeated_search_runs_the_model_once_and_finds_the_same(
    engine: MemoryEngine, counting: Counting
) -> None:
    await add(engine, "The deploy script lives in scripts/deploy.sh")
    await add(engine, "Staging runs on Fly, production on our own servers")
    counting.texts.clear()
    first = await _search(engine, "u_1", "where is the deploy script?")
    again = await _search(engine, "u_1", "where is the deploy script?")
    assert again == first and len(first) == 2
    assert counting.texts == ["where is the deploy script?"]
    assert (engine.queries.hits, engine.queries.misses) == (1, 1)


async def test_another_tenant_asking_the_same_runs_the_model_itself(engine: MemoryEngine, counting: Counting) -> None:
    await _search(engine, "u_1", "release checklist")
    await _search(engine, "u_2", "release checklist")
    assert counting.texts == ["release checklist", "release checklist"]
    assert engine.queries.hits == 0


async def test_what_is_added_is_not_kept_as_a_query(engine: MemoryEngine, counting: Counting) -> None:
    await add(engine, "Use pnpm, never npm")
    await _search(engine, "u_1", "Use pnpm, never npm")
    assert counting.texts == ["Use pnpm, never npm", "Use pnpm, never npm"]


async def test_the_least_recently_used_query_goes_first(engine: MemoryEngine, counting: Counting) -> None:
    for query in ["a", "b", "c", "a", "d"]:  # "a" used again, so "b" is the oldest when "d" needs room
        await _search(engine, "u_1", f"question {query}")
    counting.texts.clear()
    await _search(engine, "u_1", "question a")
    await _search(engine, "u_1", "question b")
    assert counting.texts == ["question b"]
    assert len(engine.queries) == 3


def test_size_zero_keeps_nothing() -> None:
    queries = QueryVectors(0)
    calls: list[str] = []

    def embed(text: str) -> list[float]:
        calls.append(text)
        return [1.0, 0.0]

    assert queries.vector("u_1", "q", embed) == [1.0, 0.0]
    assert queries.vector("u_1", "q", embed) == [1.0, 0.0]
    assert calls == ["q", "q"] and len(queries) == 0


def test_a_kept_vector_is_the_embedders_own_floats_and_a_fresh_list() -> None:
    queries = QueryVectors(4)
    vector: list[Any] = [0.1, 0.2 / 3, -1e-300]
    first = queries.vector("u_1", "q", lambda _: vector)
    kept = queries.vector("u_1", "q", lambda _: pytest.fail("the model ran again"))
    assert kept == vector and kept is not first
    kept.append(5.0)  # a caller changing its copy changes nothing kept
    assert queries.vector("u_1", "q", lambda _: [9.0]) == vector
