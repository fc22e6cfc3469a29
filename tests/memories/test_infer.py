"""Fact extraction (``infer=True``) through mem0's ``openai`` LLM provider.

TEST DOUBLE: ``FakeOpenAI`` (tests/fake_llm.py) is the only fake in the memory tests, standing in for a paid LLM API
this machine cannot reach. Everything else (mem0, the embedder, the store) is real.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.memories.embedder import OnnxMiniLMEmbedder
from app.memories.engine import MemoryEngine
from tests.fake_llm import FACTS, FakeOpenAI

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


async def test_infer_stores_extracted_facts(tmp_path: Path, embedder: OnnxMiniLMEmbedder, fake_llm: FakeOpenAI) -> None:
    engine = MemoryEngine.open(
        data_dir=tmp_path, embedder=embedder, llm_base_url=fake_llm.base_url, llm_api_key="sk-test", llm_model="fake-4o"
    )
    try:
        assert engine.infer_available
        raw = "user: I just moved to Lisbon and honestly nothing beats a flat white in the morning"
        outcomes = await engine.add(
            user_id="u_1",
            content=raw,
            visibility="user",
            scope="user",
            session=None,
            agent=None,
            tags=["chat"],
            metadata={"source": "test"},
            infer=True,
        )
        assert sorted(o.content for o in outcomes) == sorted(FACTS)
        assert {o.event for o in outcomes} == {"ADD"}

        assert len(fake_llm.requests) == 1
        request = fake_llm.requests[0]
        assert request["path"] == "/v1/chat/completions"
        assert request["auth"] == "Bearer sk-test"
        assert request["body"]["model"] == "fake-4o"
        assert "Lisbon" in json.dumps(request["body"]["messages"])

        stored = {o.id: await engine.get(user_id="u_1", memory_id=o.id) for o in outcomes}
        assert all(m is not None for m in stored.values())
        assert {m.content for m in stored.values() if m} == set(FACTS)
        assert all(m.tags == ["chat"] and m.metadata == {"source": "test"} for m in stored.values() if m)
        assert await engine.count() == 2  # the facts, not the raw text

        hits = await engine.search(
            user_id="u_1", query="where does the user live?", visibilities=["user"], limit=1, threshold=None
        )
        assert stored[hits[0].id] is not None and stored[hits[0].id].content == "User lives in Lisbon"  # type: ignore[union-attr]
    finally:
        engine.close()


async def test_without_llm_infer_stores_the_text_as_given(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> None:
    engine = MemoryEngine.open(data_dir=tmp_path, embedder=embedder)
    try:
        assert not engine.infer_available
        outcomes = await engine.add(
            user_id="u_1",
            content="Raw note",
            visibility="user",
            scope="user",
            session=None,
            agent=None,
            tags=[],
            metadata={},
            infer=True,
        )
        assert [o.content for o in outcomes] == ["Raw note"]
    finally:
        engine.close()


async def test_infer_shows_the_llm_only_memories_of_the_same_visibility(
    tmp_path: Path, embedder: OnnxMiniLMEmbedder, fake_llm: FakeOpenAI
) -> None:
    engine = MemoryEngine.open(
        data_dir=tmp_path, embedder=embedder, llm_base_url=fake_llm.base_url, llm_api_key="sk-test", llm_model="fake"
    )
    try:

        async def add(content: str, visibility: str, infer: bool) -> None:
            session = visibility.split(":")[1] if ":" in visibility else None
            await engine.add(
                user_id="u_1",
                content=content,
                visibility=visibility,
                scope="session" if session else "user",
                session=session,
                agent=None,
                tags=[],
                metadata={},
                infer=infer,
            )

        await add("Secret launch codename is Bluebird", "s:other", infer=False)
        await add("Launch codename discussion happens in Lisbon", "s:mine", infer=False)
        await add("We talked about the launch codename", "s:mine", infer=True)
        prompt = json.dumps(fake_llm.requests[-1]["body"]["messages"])
        assert "Lisbon" in prompt  # the same session's memory is context
        assert "Bluebird" not in prompt  # another session's memory never reaches the LLM
    finally:
        engine.close()
