"""One contract for the memory engine, run against both vector stores.

``edge`` is Qdrant's engine in-process (qdrant-edge); ``local`` is qdrant-client's local mode, which stands in for a
Qdrant server here (same client API). Both run in a temporary directory.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from app.errors import NotFound, ValidationFailed
from app.memories.embedder import OnnxMiniLMEmbedder
from app.memories.engine import IndexedMemory, MemoryEngine
from app.memories.vector_stores import FilterError, parse_filters
from tests.memories.legacy_index import with_shared_token_ids

pytestmark = pytest.mark.anyio

Opener = Callable[[], MemoryEngine]


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed (nothing stands in for it)."""

    def __init__(self, inner: OnnxMiniLMEmbedder) -> None:
        self.inner = inner
        self.dims = inner.dims
        self.model_id = inner.model_id
        self.texts: list[str] = []

    def embed(self, text: str) -> list[float]:
        self.texts.append(text)
        return self.inner.embed(text)

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_batch(texts)


@pytest.fixture
def counting(embedder: OnnxMiniLMEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture(params=["edge", "edge-process", "local"])
def open_engine(request: pytest.FixtureRequest, tmp_path: Path, counting: CountingEmbedder) -> Iterator[Opener]:
    """Opens (and reopens) an engine on the same data; closes whatever it opened. ``edge-process``: the embedded
    index in a process of its own, as ``engram serve`` runs it. The engines embed with ``counting``."""
    opened: list[MemoryEngine] = []

    def opener() -> MemoryEngine:
        extra: dict[str, Any] = {"qdrant_local_path": tmp_path / "qdrant-local"} if request.param == "local" else {}
        if request.param == "edge-process":
            extra["index_process"] = True
        engine = MemoryEngine.open(data_dir=tmp_path / "data", embedder=counting, **extra)
        opened.append(engine)
        return engine

    yield opener
    for engine in opened:
        engine.close()


@pytest.fixture
def engine(open_engine: Opener) -> MemoryEngine:
    return open_engine()


async def scores(engine: MemoryEngine, query: str, *, limit: int = 10) -> dict[str, float]:
    """The scores of the memories of tenant "mine" a search finds, by id."""
    hits = await engine.search(user_id="mine", query=query, visibilities=["user"], limit=limit, threshold=None)
    return {h.id: h.score for h in hits}


async def add(
    engine: MemoryEngine,
    content: str,
    *,
    user_id: str = "u_1",
    visibility: str = "user",
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    scope = {"u": "user", "s": "session", "a": "agent"}[visibility[0]]
    outcomes = await engine.add(
        user_id=user_id,
        content=content,
        visibility=visibility,
        scope=scope,
        session=visibility.split(":")[1] if ":" in visibility else None,
        agent=visibility.split(":")[2] if visibility.startswith("a:") else None,
        tags=tags or [],
        metadata=metadata or {},
        infer=False,
    )
    assert [o.event for o in outcomes] == ["ADD"]
    assert outcomes[0].content == content
    return outcomes[0].id


async def search(engine: MemoryEngine, query: str, **kwargs: Any) -> list[str]:
    params: dict[str, Any] = {"user_id": "u_1", "visibilities": ["user"], "limit": 10, "threshold": None}
    params.update(kwargs)
    return [hit.id for hit in await engine.search(query=query, **params)]


async def test_add_then_search_finds_it(engine: MemoryEngine) -> None:
    coffee = await add(engine, "I drink espresso every morning before work")
    await add(engine, "The production cluster runs Kubernetes 1.31")
    hits = await engine.search(
        user_id="u_1", query="what coffee does the user like?", visibilities=["user"], limit=5, threshold=None
    )
    assert hits[0].id == coffee
    assert 0 < hits[0].score <= 1
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)
    memory = await engine.get(user_id="u_1", memory_id=coffee)
    assert memory is not None
    assert (memory.user_id, memory.visibility, memory.scope, memory.content) == (
        "u_1",
        "user",
        "user",
        "I drink espresso every morning before work",
    )
    assert memory.created_at


async def test_tenants_never_see_each_other(engine: MemoryEngine) -> None:
    mine = await add(engine, "My bank PIN hint is the dog's birthday", user_id="tenant_a", visibility="s:web")
    theirs = await add(engine, "The dog's birthday is in May", user_id="tenant_b", visibility="s:web")
    for_b = await search(engine, "dog birthday PIN", user_id="tenant_b", visibilities=["user", "s:web"])
    assert for_b == [theirs]
    assert await search(engine, "dog birthday PIN", user_id="tenant_a", visibilities=["s:web"]) == [mine]
    assert await engine.ids(user_id="tenant_b") == {theirs}


async def test_visibility_keys_filter(engine: MemoryEngine) -> None:
    user = await add(engine, "Prefers tabs over spaces", visibility="user")
    session = await add(engine, "Working on the tabs refactor in the web session", visibility="s:web")
    agent = await add(engine, "Research agent noted tabs benchmarks", visibility="a:web:research")
    other = await add(engine, "Tabs discussion in the cli session", visibility="s:cli")
    assert set(await search(engine, "tabs", visibilities=["user"])) == {user}
    assert set(await search(engine, "tabs", visibilities=["user", "s:web"])) == {user, session}
    assert set(await search(engine, "tabs", visibilities=["user", "s:web", "a:web:research"])) == {user, session, agent}
    assert other not in await search(engine, "tabs", visibilities=["user", "s:web", "a:web:research"])
    assert await search(engine, "tabs", visibilities=[]) == []


async def test_tags_filter_requires_all_tags(engine: MemoryEngine) -> None:
    both = await add(engine, "Deploys happen on Fridays", tags=["ops", "deploy"])
    ops = await add(engine, "Deploy pager rotation is weekly", tags=["ops"])
    deploy = await add(engine, "Deploy scripts live in bin/", tags=["deploy"])
    assert await search(engine, "deploy", tags=["ops", "deploy"]) == [both]
    assert set(await search(engine, "deploy", tags=["ops"])) == {both, ops}
    assert set(await search(engine, "deploy", tags=["deploy"])) == {both, deploy}
    assert await search(engine, "deploy", tags=["ops", "deploy", "missing"]) == []


async def test_metadata_filter(engine: MemoryEngine) -> None:
    english = await add(engine, "The meeting is at noon", metadata={"lang": "en", "priority": 2, "pinned": True})
    french = await add(engine, "La réunion est à midi", metadata={"lang": "fr", "priority": 1, "weight": 0.5})
    assert await search(engine, "meeting time", metadata={"lang": "en"}) == [english]
    assert await search(engine, "meeting time", metadata={"priority": 1}) == [french]
    assert await search(engine, "meeting time", metadata={"pinned": True}) == [english]
    assert await search(engine, "meeting time", metadata={"weight": 0.5}) == [french]
    assert await search(engine, "meeting time", metadata={"lang": "de"}) == []
    with pytest.raises(ValidationFailed):
        await search(engine, "meeting time", metadata={"a.b": "x"})


async def test_metadata_cannot_override_identity(engine: MemoryEngine) -> None:
    sneaky = await add(
        engine,
        "Metadata tries to move this memory",
        user_id="u_1",
        metadata={"user_id": "u_2", "visibility": "s:other", "data": "forged", "hash": "x", "tags": ["forged"]},
    )
    memory = await engine.get(user_id="u_1", memory_id=sneaky)
    assert memory is not None
    assert (memory.user_id, memory.visibility, memory.content, memory.tags) == (
        "u_1",
        "user",
        "Metadata tries to move this memory",
        [],
    )
    assert memory.metadata["user_id"] == "u_2"  # kept, but only as the caller's own metadata
    assert await engine.get(user_id="u_2", memory_id=sneaky) is None
    assert await search(engine, "move this memory", user_id="u_2", visibilities=["user", "s:other"]) == []
    assert await search(engine, "move this memory", visibilities=["s:other"]) == []


async def test_threshold_drops_weak_matches(engine: MemoryEngine) -> None:
    close = await add(engine, "The user is allergic to peanuts")
    await add(engine, "Quarterly revenue grew by twelve percent")
    hits = await engine.search(user_id="u_1", query="peanut allergy", visibilities=["user"], limit=10, threshold=None)
    assert hits[0].id == close
    strict = await engine.search(user_id="u_1", query="peanut allergy", visibilities=["user"], limit=10, threshold=0.15)
    assert [h.id for h in strict] == [close]
    assert all(h.score >= 0.15 for h in strict)
    with pytest.raises(ValidationFailed):
        await engine.search(user_id="u_1", query="x", visibilities=["user"], limit=10, threshold=1.5)


async def test_limit(engine: MemoryEngine) -> None:
    for n in range(7):
        await add(engine, f"Note number {n} about the garden")
    top3 = await search(engine, "garden", limit=3)
    everything = await search(engine, "garden", limit=50)
    assert len(everything) == 7
    # Fetching only `limit` hits from the store (not mem0's 60) gives the same best hits in the same order.
    assert top3 == everything[:3]
    assert await search(engine, "garden", limit=0) == []


async def test_update_changes_content_and_search(engine: MemoryEngine) -> None:
    memory_id = await add(engine, "Favourite editor is vim", tags=["tools"], metadata={"v": 1})
    await engine.update(
        user_id="u_1", memory_id=memory_id, content="Favourite drink is matcha", tags=None, metadata=None
    )
    memory = await engine.get(user_id="u_1", memory_id=memory_id)
    assert memory is not None
    assert (memory.content, memory.tags, memory.metadata) == ("Favourite drink is matcha", ["tools"], {"v": 1})
    hits = await engine.search(user_id="u_1", query="green tea drink", visibilities=["user"], limit=1, threshold=0.1)
    assert [h.id for h in hits] == [memory_id]

    await engine.update(user_id="u_1", memory_id=memory_id, content=None, tags=["drinks"], metadata={"v": 2})
    memory = await engine.get(user_id="u_1", memory_id=memory_id)
    assert memory is not None
    assert (memory.content, memory.tags, memory.metadata) == ("Favourite drink is matcha", ["drinks"], {"v": 2})
    assert await search(engine, "matcha", tags=["drinks"]) == [memory_id]
    assert await search(engine, "matcha", tags=["tools"]) == []
    with pytest.raises(ValidationFailed):
        await engine.update(user_id="u_1", memory_id=memory_id, content="  ", tags=None, metadata=None)


async def test_a_tags_or_metadata_update_keeps_the_vector_and_embeds_nothing(
    engine: MemoryEngine, counting: CountingEmbedder
) -> None:
    memory_id = await add(engine, "Favourite editor is vim", tags=["tools"])
    before = (await engine.vectors([memory_id]))[memory_id][1]
    counting.texts.clear()

    await engine.update(user_id="u_1", memory_id=memory_id, content=None, tags=["editors"], metadata={"v": 2})

    assert counting.texts == []
    memory, vector = (await engine.vectors([memory_id]))[memory_id]
    assert (memory.content, memory.tags, memory.metadata) == ("Favourite editor is vim", ["editors"], {"v": 2})
    # The same vector (the client's local mode normalises what it stores again: float noise only).
    assert np.allclose(vector, before, atol=1e-6)
    assert await search(engine, "vim", tags=["editors"]) == [memory_id]
    # Another tenant's id is still not found, and its vector is not lent to anyone.
    with pytest.raises(NotFound):
        await engine.update(user_id="u_2", memory_id=memory_id, content=None, tags=["x"], metadata=None)
    # A new text is embedded, once.
    counting.texts.clear()
    await engine.update(
        user_id="u_1", memory_id=memory_id, content="Favourite editor is helix", tags=None, metadata=None
    )
    assert counting.texts == ["Favourite editor is helix"]


async def test_delete(engine: MemoryEngine) -> None:
    gone = await add(engine, "Temporary note to forget")
    kept = await add(engine, "Permanent note to remember")
    await engine.delete(user_id="u_1", memory_id=gone)
    assert await engine.get(user_id="u_1", memory_id=gone) is None
    assert await search(engine, "note") == [kept]
    with pytest.raises(NotFound):
        await engine.delete(user_id="u_1", memory_id=gone)


async def test_other_tenants_ids_do_not_exist(engine: MemoryEngine) -> None:
    theirs = await add(engine, "Tenant A's secret", user_id="tenant_a")
    assert await engine.get(user_id="tenant_b", memory_id=theirs) is None
    with pytest.raises(NotFound):
        await engine.update(user_id="tenant_b", memory_id=theirs, content="hijacked", tags=None, metadata=None)
    with pytest.raises(NotFound):
        await engine.delete(user_id="tenant_b", memory_id=theirs)
    memory = await engine.get(user_id="tenant_a", memory_id=theirs)
    assert memory is not None and memory.content == "Tenant A's secret"
    assert await engine.get(user_id="tenant_a", memory_id="not-a-uuid") is None
    with pytest.raises(NotFound):
        await engine.delete(user_id="tenant_a", memory_id=str(uuid.uuid4()))


async def test_upsert_keeps_given_ids(engine: MemoryEngine) -> None:
    records = [
        IndexedMemory(
            id=str(uuid.uuid4()),
            user_id="u_1",
            visibility="user" if n % 2 else "s:web",
            scope="user" if n % 2 else "session",
            session=None if n % 2 else "web",
            agent=None,
            content=text,
            tags=["imported"],
            metadata={"n": n},
            created_at="2025-01-02T03:04:05+00:00",
        )
        for n, text in enumerate(["Likes hiking in the Alps", "Owns a grey cat named Miso", "Speaks Portuguese"])
    ]
    await engine.upsert(records)
    assert await engine.ids(user_id="u_1") == {r.id for r in records}
    hits = await search(engine, "pet cat", visibilities=["user", "s:web"], tags=["imported"])
    assert hits[0] == records[1].id
    # The index says when it was last written: a memory upserted as it is was last written when it was created.
    assert await engine.get(user_id="u_1", memory_id=records[0].id) == dataclasses.replace(
        records[0], updated_at=records[0].created_at
    )
    # Upserting again replaces, not duplicates.
    await engine.upsert(records)
    assert await engine.count() == 3
    with pytest.raises(ValidationFailed):
        await engine.upsert([IndexedMemory(**{**_fields(records[0]), "id": "not-a-uuid"})])


def _fields(record: IndexedMemory) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


async def test_purge_removes_points_of_any_tenant(engine: MemoryEngine) -> None:
    a = await add(engine, "Orphan one", user_id="tenant_a")
    b = await add(engine, "Orphan two", user_id="tenant_b")
    keep = await add(engine, "Backed by a row", user_id="tenant_b")
    await engine.purge([a, b, "not-a-uuid"])
    assert await engine.ids() == {keep}


async def test_reset_empties_the_collection(engine: MemoryEngine) -> None:
    await add(engine, "Something to lose")
    await engine.reset()
    assert await engine.count() == 0
    assert await search(engine, "something") == []
    new = await add(engine, "Something after the reset")
    assert await search(engine, "something") == [new]


async def test_data_survives_reopening(open_engine: Opener) -> None:
    first = open_engine()
    memory_id = await add(first, "Persisted across restarts", tags=["durable"])
    first.close()
    second = open_engine()
    assert await second.ids() == {memory_id}
    assert await search(second, "restarts", tags=["durable"]) == [memory_id]


async def test_concurrent_adds_and_searches(engine: MemoryEngine) -> None:
    added: list[str] = []

    async def one_add(n: int) -> None:
        added.append(await add(engine, f"Concurrent memory {n} about topic {n % 5}", tags=[f"t{n % 3}"]))

    async def one_search(n: int) -> None:
        await search(engine, f"topic {n % 5}", tags=[f"t{n % 3}"])

    async with anyio.create_task_group() as tg:
        for n in range(50):
            tg.start_soon(one_add, n)
            tg.start_soon(one_search, n)
    assert len(set(added)) == 50
    assert await engine.count() == 50
    assert await engine.ids(user_id="u_1") == set(added)


async def test_bad_input_is_a_validation_error(engine: MemoryEngine) -> None:
    with pytest.raises(ValidationFailed):
        await add(engine, "   ")
    with pytest.raises(ValidationFailed):
        await add(engine, "fine", user_id="has space")
    with pytest.raises(ValidationFailed):
        await engine.search(user_id="u_1", query="", visibilities=["user"], limit=5, threshold=None)


async def test_ping_and_backend(engine: MemoryEngine) -> None:
    await engine.ping()
    assert engine.backend in ("qdrant-edge", "qdrant-local")
    assert engine.infer_available is False


def test_filter_grammar() -> None:
    conditions = parse_filters(
        {
            "user_id": "u_1",
            "visibility": {"in": ["user", "s:web"]},
            "AND": [{"tags": "a"}, {"tags": "b"}],
            "meta.lang": "en",
        }
    )
    assert [(c.key, c.op, c.values) for c in conditions] == [
        ("user_id", "eq", ("u_1",)),
        ("visibility", "in", ("user", "s:web")),
        ("tags", "eq", ("a",)),
        ("tags", "eq", ("b",)),
        ("meta.lang", "eq", ("en",)),
    ]
    bad: dict[str, Any]
    for bad in ({"OR": [{"a": 1}]}, {"a": {"gt": 1}}, {"a": {"in": []}}, {"a": None}, {"a": ["x"]}, {"a..b": 1}):
        with pytest.raises(FilterError):
            parse_filters(bad)


_WRITER = """
import sys, uuid
from app.memories.vector_stores import EdgeVectorStore
store = EdgeVectorStore(path=sys.argv[1], flush_interval=3600)  # no flush: only the write-ahead log protects writes
while True:
    point_id = str(uuid.uuid4())
    store.insert([[1.0] + [0.0] * 383], [{"user_id": "u_1", "data": "x"}], [point_id])
    print(point_id, flush=True)
"""


@pytest.mark.slow
def test_edge_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from app.memories.vector_stores import EdgeVectorStore

    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert writer.stdout is not None
    acknowledged = [writer.stdout.readline().strip() for _ in range(300)]
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    store = EdgeVectorStore(path=str(tmp_path), flush_interval=0)
    try:
        assert set(acknowledged) <= store.ids()
    finally:
        store.close()


# --- hybrid search: the same tests on both stores ---------------------------------------------------------------

_TICKETS = [
    "What is the status of the release ticket?",
    "Ticket updates are posted in the ops channel",
    "Every ticket gets a priority label",
    "Open tickets are reviewed every Monday",
    "The deployment status is green",
]


async def test_an_exact_rare_word_wins_where_meaning_alone_misses(engine: MemoryEngine, embedder: Any) -> None:
    target = await add(engine, "ZX-4471 (ticket): login crashes on Safari since the status bar update")
    for text in _TICKETS:
        await add(engine, text)
    query = "what is the status of ticket ZX-4471?"
    # The premise: by meaning alone (the dense vectors), another memory outranks the one that names the ticket.
    cosines = {
        text: sum(a * b for a, b in zip(embedder.embed(text), embedder.embed(query), strict=True)) for text in _TICKETS
    }
    target_cosine = sum(
        a * b
        for a, b in zip(
            embedder.embed("ZX-4471 (ticket): login crashes on Safari since the status bar update"),
            embedder.embed(query),
            strict=True,
        )
    )
    assert max(cosines.values()) > target_cosine
    hits = await engine.search(user_id="u_1", query=query, visibilities=["user"], limit=3, threshold=None)
    assert hits[0].id == target
    assert hits[0].score > hits[1].score


async def test_a_reply_is_found_by_the_question_it_answers(engine: MemoryEngine) -> None:
    question = "What games did you play at the church picnic?"
    reply = "Mostly charades and a scavenger hunt, we laughed a lot"
    for user_id, context in (("with_context", question), ("without_context", "")):
        outcomes = await engine.add(
            user_id=user_id,
            content=reply,
            visibility="user",
            scope="user",
            session=None,
            agent=None,
            tags=[],
            metadata={},
            infer=False,
            context=context,
        )
        await add(engine, "We bought a new grill for the garden", user_id=user_id)
        assert outcomes[0].id
    scores = {}
    for user_id in ("with_context", "without_context"):
        hits = await engine.search(
            user_id=user_id, query="church picnic games", visibilities=["user"], limit=1, threshold=None
        )
        assert hits[0].memory.content == reply
        scores[user_id] = hits[0].score
    assert scores["with_context"] > scores["without_context"] + 0.1


async def test_dates_make_memories_findable_by_time(engine: MemoryEngine) -> None:
    may = await add(engine, "We adopted a pet from the shelter", metadata={"date": "8 May, 2023"})
    await add(engine, "We adopted a pet from the rescue centre", metadata={"date": "3 June, 2024"})
    await add(engine, "We adopted a new pet", metadata={"date": "2024-11-02T10:00:00+00:00"})
    assert (await search(engine, "which pet did we adopt in May 2023?"))[0] == may


async def test_scores_are_readable_and_threshold_zero_keeps_everything(engine: MemoryEngine) -> None:
    peanuts = await add(engine, "The user is allergic to peanuts")
    unrelated = await add(engine, "Quarterly revenue grew by twelve percent")
    hits = await engine.search(user_id="u_1", query="peanut allergy", visibilities=["user"], limit=10, threshold=0)
    scores = {hit.id: hit.score for hit in hits}
    assert set(scores) == {peanuts, unrelated}
    assert 0.2 < scores[peanuts] <= 1
    assert 0 <= scores[unrelated] < 0.05


async def test_a_document_section_weighs_meaning_and_words_alike(engine: MemoryEngine, embedder: Any) -> None:
    text = "fs.mkdir creates a directory; with recursive it creates the parent directories as well"
    note = await add(engine, text)
    section = await add(engine, text, metadata={"kind": "document", "source": "api/fs.md > mkdir"})
    # No word in common with either: only meaning counts, and a document section gives it twice the weight.
    query = "make a folder and any missing folders above it"
    cosine = sum(a * b for a, b in zip(embedder.embed(text), embedder.embed(query), strict=True))
    assert cosine > 0.2
    hits = await engine.search(user_id="u_1", query=query, visibilities=["user"], limit=2, threshold=0)
    scores = {hit.id: hit.score for hit in hits}
    assert [hit.id for hit in hits] == [section, note]
    assert scores[note] == pytest.approx(0.25 * cosine, abs=1e-4)
    assert scores[section] == pytest.approx(0.5 * cosine, abs=1e-4)


def test_both_stores_score_alike(tmp_path: Path, embedder: OnnxMiniLMEmbedder) -> None:
    """The fusion is the same formula on qdrant-edge and qdrant-client: the same memories get the same scores."""

    async def scores(engine: MemoryEngine) -> list[tuple[str, float]]:
        for text in ["ZX-4471 (ticket): login crashes on Safari since the status bar update", *_TICKETS]:
            await add(engine, text)
        hits = await engine.search(
            user_id="u_1", query="status of ticket ZX-4471", visibilities=["user"], limit=10, threshold=0
        )
        return [(hit.memory.content, round(hit.score, 4)) for hit in hits]

    edge = MemoryEngine.open(data_dir=tmp_path / "edge", embedder=embedder)
    local = MemoryEngine.open(data_dir=tmp_path / "local", embedder=embedder, qdrant_local_path=tmp_path / "ql")
    try:
        assert anyio.run(scores, edge) == anyio.run(scores, local)
    finally:
        edge.close()
        local.close()


def _legacy_index(kind: str, tmp_path: Path, embedder: OnnxMiniLMEmbedder, text: str) -> str:
    """An index as the code before hybrid search built it: the dense vector alone (qdrant-edge), or mem0's layout
    with an unused "bm25" slot (qdrant-client). Returns the id of the one point it holds."""
    point_id = str(uuid.uuid4())
    payload = {"data": text, "user_id": "u_1", "visibility": "user", "scope": "user", "tags": [], "meta": {}}
    if kind.startswith("edge"):
        import qdrant_edge as qe

        shard_path = tmp_path / "data" / "qdrant-edge" / "engram_memories"
        shard_path.mkdir(parents=True)
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=embedder.dims, distance=qe.Distance.Cosine))
        shard = qe.EdgeShard.create(str(shard_path), config)
        shard.update(qe.UpdateOperation.upsert_points([qe.Point(point_id, embedder.embed(text), payload)]))
        shard.flush()
        shard.close()
    else:
        from qdrant_client import QdrantClient, models

        client = QdrantClient(path=str(tmp_path / "qdrant-local"))
        client.create_collection(
            "engram_memories",
            vectors_config=models.VectorParams(size=embedder.dims, distance=models.Distance.COSINE, on_disk=True),
            sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        client.upsert(
            "engram_memories", [models.PointStruct(id=point_id, vector=embedder.embed(text), payload=payload)]
        )
        client.close()
    return point_id


async def test_a_dense_only_index_is_emptied_to_be_rebuilt(
    open_engine: Opener, request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxMiniLMEmbedder
) -> None:
    kind = request.node.callspec.params["open_engine"]
    old = _legacy_index(
        kind, tmp_path, embedder, "ZX-4471 (ticket): login crashes on Safari since the status bar update"
    )
    engine = open_engine()
    assert engine.rebuilt
    assert await engine.count() == 0
    # What repair (or reindex) then does: the records go back in, with their lexical vectors.
    record = IndexedMemory(
        old,
        "u_1",
        "user",
        "user",
        None,
        None,
        "ZX-4471 (ticket): login crashes on Safari since the status bar update",
        [],
        {},
        "",
    )
    await engine.upsert([record])
    for text in _TICKETS:
        await add(engine, text)
    assert (await search(engine, "what is the status of ticket ZX-4471?"))[0] == old
    engine.close()
    assert not open_engine().rebuilt  # once upgraded, it stays


def _shard_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "qdrant-edge" / "engram_memories"


async def test_an_index_from_before_tenant_scoped_token_ids_is_rewritten_in_place(
    open_engine: Opener, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = open_engine()
    target = await add(engine, "ZX-4471 (ticket): login crashes on Safari since the status bar update")
    for text in _TICKETS:
        await add(engine, text)
    assert (await search(engine, "what is the status of ticket ZX-4471?"))[0] == target
    engine.close()
    kind = request.node.callspec.params["open_engine"]
    assert (
        with_shared_token_ids(_shard_path(tmp_path) if kind.startswith("edge") else None, tmp_path / "qdrant-local")
        == len(_TICKETS) + 1
    )

    engine = open_engine()
    # The query's token ids are the tenant's now: the old vectors match none of its words, and by meaning alone
    # another ticket outranks the one that names it (test_an_exact_rare_word_wins_where_meaning_alone_misses).
    assert (await search(engine, "what is the status of ticket ZX-4471?"))[0] != target
    assert await engine.relex() == len(_TICKETS) + 1
    assert (await search(engine, "what is the status of ticket ZX-4471?"))[0] == target
    assert await engine.relex() == 0, "nothing left to rewrite"
    engine.close()
    assert (await search(open_engine(), "what is the status of ticket ZX-4471?"))[0] == target, "rewritten on disk"


async def test_packed_vectors_are_the_indexed_vectors_as_float32(engine: MemoryEngine, embedder: Any) -> None:
    """What edge sync ships: the content each point was embedded from and its dense vector, little-endian float32."""
    kept = await add(engine, "Owns a grey cat named Miso")
    gone = await add(engine, "Speaks Portuguese")
    await engine.purge([gone])
    packed = await engine.packed_vectors([kept, gone, "not-a-uuid", str(uuid.uuid4())])
    assert set(packed) == {kept}
    content, raw = packed[kept]
    assert content == "Owns a grey cat named Miso"
    [(_, floats)] = (await engine.vectors([kept])).values()
    assert raw == np.asarray(floats, dtype="<f4").tobytes()
    assert np.allclose(np.frombuffer(raw, dtype="<f4"), embedder.embed(content), atol=1e-5)


async def test_another_tenants_memories_never_feed_a_tenants_feedback_pass(engine: MemoryEngine) -> None:
    # The first pass picks the words that join the query from its best hits: the caller's own, never another's.
    # ``rafting`` shares no word with the query nor with ``hiking``, so only a feedback word can give it a lexical
    # score; its score is then its dense part alone, which nothing of another tenant's can move.
    await add(
        engine,
        "Hiking in the Alps each summer: glaciers, chamois, edelweiss, cowbells, fondue, gondolas, "
        "marmots, waterfalls, chalets, raclette, trails, ridges, summits, meadows, lakes",
        user_id="mine",
    )
    rafting = await add(engine, "Kayaking and canoeing down rapids", user_id="mine")
    await add(engine, "Grandma visits at Christmas", user_id="mine")

    before = await scores(engine, "hiking holidays")
    for n in range(30):
        await add(engine, f"Hiking holidays {n}: kayaking, canoeing, rapids, hiking, holidays", user_id="theirs")
    after = await scores(engine, "hiking holidays")
    assert set(after) == set(before), "only the caller's memories"
    assert after[rafting] == pytest.approx(before[rafting], abs=1e-6)
    assert after == pytest.approx(before, abs=1e-6)


async def test_another_tenants_words_never_change_which_memories_feed_a_tenants_feedback_pass(
    engine: MemoryEngine,
) -> None:
    # The first pass ranks the caller's memories by the caller's own word rarity: "holidays" (2 of 7) outweighs
    # "hiking" (4 of 7), so both holiday memories are among the few that lend their words to the second pass, and
    # ``dawn`` (no word of the query) is found through theirs. Another tenant full of "holidays" would, with a
    # collection-wide IDF, push them below the hiking ones and take ``dawn``'s lexical part away.
    for place in ("Jura", "Vosges", "Tatras", "Dolomites"):
        await add(engine, f"Hiking the {place}", user_id="mine")
    await add(engine, "Holidays near the lighthouse", user_id="mine")
    await add(engine, "Holidays building sandcastles", user_id="mine")
    dawn = await add(engine, "Lighthouse and sandcastles at dawn", user_id="mine")

    before = await scores(engine, "hiking holidays")
    for n in range(30):
        await add(engine, f"Holidays {n}", user_id="theirs")
    after = await scores(engine, "hiking holidays")
    assert after[dawn] == pytest.approx(before[dawn], abs=1e-6)
    assert after == pytest.approx(before, abs=1e-6)


async def test_a_tenants_own_memories_set_how_rare_its_words_are(engine: MemoryEngine) -> None:
    # The IDF is the tenant's own, and live: a word that grows common among its memories weighs less (and one that
    # stays rare more), and deleting those memories gives the old weights back.
    alps = await add(engine, "A week in the Alps", user_id="mine")
    boots = await add(engine, "A pair of new boots", user_id="mine")

    before = await scores(engine, "alps boots", limit=20)
    common = [await add(engine, f"Boots, pair {n}", user_id="mine") for n in range(10)]
    after = await scores(engine, "alps boots", limit=20)
    assert after[alps] > before[alps] + 0.01
    assert after[boots] < before[boots] - 0.01
    assert after[alps] > after[boots]
    for memory_id in common:
        await engine.delete(user_id="mine", memory_id=memory_id)
    assert await scores(engine, "alps boots", limit=20) == pytest.approx(before, abs=1e-6)


async def test_another_tenants_memories_never_change_a_tenants_scores(engine: MemoryEngine) -> None:
    for text in ("We hike in the Alps every summer", "The hiking boots need new laces", "Grandma visits at Christmas"):
        await add(engine, text, user_id="mine")

    async def ranked() -> list[tuple[str, float]]:
        hits = await engine.search(
            user_id="mine", query="hiking trips", visibilities=["user"], limit=10, threshold=None
        )
        return [(h.id, round(h.score, 6)) for h in hits]

    before = await ranked()
    for n in range(30):
        await add(engine, f"Hiking trip {n}: hiking the mountains", user_id="theirs")
    assert await ranked() == before


async def test_memories_a_reader_may_not_read_never_change_its_scores(engine: MemoryEngine) -> None:
    # Within a tenant too: word rarity counts only what the reader may read, so another session's memories never
    # move this session's scores (nor could its scores tell how often the other session uses a word).
    for text in ("We hike in the Alps every summer", "The hiking boots need new laces", "Grandma visits at Christmas"):
        await add(engine, text, user_id="mine")
    await add(engine, "Trips booked for the offsite", user_id="mine", visibility="s:one")

    async def ranked() -> list[tuple[str, float]]:
        hits = await engine.search(
            user_id="mine", query="hiking trips", visibilities=["user", "s:one"], limit=10, threshold=None
        )
        return [(h.id, round(h.score, 6)) for h in hits]

    before = await ranked()
    for n in range(30):
        await add(engine, f"Hiking trip {n}: hiking the mountains", user_id="mine", visibility="s:two")
    assert await ranked() == before
