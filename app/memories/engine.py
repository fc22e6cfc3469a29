"""The memory engine: tenant-scoped add/search/get/update/delete over mem0's ``Memory``. The only door to mem0 and
Qdrant: the rest of the app calls this, never them (mem0's plumbing is in ``mem0_wiring``)."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio.to_thread

from app.errors import NotFound, ServiceUnavailable, ValidationFailed
from app.memories.embedder import Embedder
from app.memories.mem0_wiring import open_memory, translate_errors, without_reset_notice
from app.memories.points import (
    IndexedMemory,
    SearchHit,
    clean_metadata,
    clean_tags,
    is_uuid,
    require_text,
    to_hit,
    to_indexed,
    to_payload,
)
from app.memories.query_vectors import SEARCHING_AS, STORED_VECTOR, QueryVectors

if TYPE_CHECKING:
    from mem0 import Memory

    from app.memories.vector_stores import EdgeVectorStore, ServerQdrantStore
    from app.memories.vector_stores.edge_process import EdgeIndexProcess

P = ParamSpec("P")
T = TypeVar("T")

_UPSERT_CHUNK = 256

__all__ = ["AddOutcome", "IndexInUse", "IndexedMemory", "MemoryEngine", "SearchHit"]


class IndexInUse(ServiceUnavailable):
    """Another process (usually a running server) has the embedded vector index open."""


@dataclass(frozen=True, slots=True)
class AddOutcome:
    id: str
    content: str
    event: str  # "ADD": mem0 2.2.1's infer pipeline only ever adds


class MemoryEngine:
    """Tenant-scoped add/search/get/update/delete over mem0. Every call names the tenant (``user_id``).

    Payload layout of a point: mem0's own keys (``data`` = content, ``hash``, ``created_at``, ``updated_at``,
    ``text_lemmatized``, ``role``), ``user_id`` = tenant, then ``visibility``, ``scope``, ``session``, ``agent``,
    ``tags``, and the caller's metadata nested under ``meta`` so it can never overwrite any of the others.
    """

    def __init__(
        self,
        memory: Memory,
        store: EdgeVectorStore | EdgeIndexProcess | ServerQdrantStore,
        backend: str,
        infer: bool,
        model_id: str = "",
        queries: QueryVectors | None = None,
    ) -> None:
        self._memory = memory
        # The vectors of recent searches (its counts tell how often a search skipped the model).
        self.queries = queries if queries is not None else QueryVectors(0)
        self._store = store
        self._backend = backend
        self._infer_available = infer
        self._model_id = model_id
        # reset() swaps the store under mem0; everything else may run concurrently.
        self._reset_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        *,
        data_dir: Path,
        embedder: Embedder,
        qdrant_url: str | None = None,
        qdrant_api_key: str | None = None,
        qdrant_local_path: Path | None = None,
        collection: str = "engram_memories",
        llm_base_url: str | None = None,
        llm_api_key: str | None = None,
        llm_model: str = "gpt-4o-mini",
        query_cache_size: int = 0,
        index_process: bool = False,
    ) -> MemoryEngine:
        """qdrant_url -> a Qdrant server; qdrant_local_path -> qdrant-client's local mode; else qdrant-edge (in a
        process of its own with ``index_process``)."""
        from app.memories.vector_stores import IndexLocked, StoreError

        queries = QueryVectors(query_cache_size)
        try:
            memory, backend = open_memory(
                data_dir=data_dir,
                embedder=embedder,
                qdrant_url=qdrant_url,
                qdrant_api_key=qdrant_api_key,
                qdrant_local_path=qdrant_local_path,
                collection=collection,
                llm_base_url=llm_base_url,
                llm_api_key=llm_api_key,
                llm_model=llm_model,
                query_vectors=queries,
                index_process=index_process,
            )
        except IndexLocked as exc:
            raise IndexInUse(str(exc)) from exc
        except StoreError as exc:
            raise ServiceUnavailable(f"memory index unavailable: {exc}") from exc
        model_id = _model_id(embedder)
        return cls(memory, memory.vector_store, backend, infer=bool(llm_base_url), model_id=model_id, queries=queries)

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def rebuilt(self) -> bool:
        """Opening found an index from before hybrid search and emptied it: it must be refilled (repair does)."""
        return bool(getattr(self._store, "rebuilt", False))

    @property
    def infer_available(self) -> bool:
        return self._infer_available

    @property
    def model_id(self) -> str:
        """Names the dense embedding: a vector shipped by a node with the same id can be used as it is."""
        return self._model_id

    # --- async API (mem0 is synchronous: each call runs in a worker thread) ----------------------------------------

    async def add(
        self,
        *,
        user_id: str,
        content: str,
        visibility: str,
        scope: str,
        session: str | None,
        agent: str | None,
        tags: list[str],
        metadata: dict[str, Any],
        infer: bool,
        created_at: str | None = None,
        context: str = "",
        end_user: str | None = None,
    ) -> list[AddOutcome]:
        """Store ``content`` (or, with ``infer`` and an LLM configured, the facts an LLM extracts from it).

        Without an LLM, ``infer`` is ignored: the content is stored as given. ``created_at`` (ISO 8601) lets the
        index carry the same timestamp as the record; ``context`` is the memory written just before it there.
        """
        return await self._run(
            self._add,
            user_id,
            content,
            visibility,
            scope,
            session,
            agent,
            tags,
            metadata,
            infer and self._infer_available,
            created_at,
            context,
            end_user,
        )

    async def search(
        self,
        *,
        user_id: str,
        query: str,
        visibilities: list[str] | None,
        limit: int,
        threshold: float | None,
        tags: list[str] | None = None,
        metadata: dict[str, str | int | float | bool] | None = None,
        scope: str | None = None,
        entities: Mapping[str, Sequence[str]] | None = None,
    ) -> list[SearchHit]:
        """Best matches first among the tenant's memories with one of ``visibilities`` (None: all of the tenant's,
        for the owner's own view), all ``tags``, ``metadata``, when given ``scope``, and for each field of
        ``entities`` (end_user, session, agent) one of its values."""
        return await self._run(
            self._search, user_id, query, visibilities, limit, threshold, tags, metadata, scope, entities
        )

    async def get(self, *, user_id: str, memory_id: str) -> IndexedMemory | None:
        """None if absent or another tenant's."""
        return await self._run(self._get, user_id, memory_id)

    async def update(
        self,
        *,
        user_id: str,
        memory_id: str,
        content: str | None,
        tags: list[str] | None,
        metadata: dict[str, Any] | None,
    ) -> None:
        """Replace whichever of content, tags, metadata is given. NotFound if absent or another tenant's."""
        await self._run(self._update, user_id, memory_id, content, tags, metadata)

    async def delete(self, *, user_id: str, memory_id: str) -> None:
        """NotFound if absent or another tenant's."""
        await self._run(self._delete, user_id, memory_id)

    async def upsert(
        self, records: Sequence[IndexedMemory], vectors: Mapping[str, Sequence[float]] | None = None
    ) -> None:
        """Embed in batches and write with the given ids (reindex/repair); existing points are replaced.

        ``vectors`` (by memory id, from this engine's model) are used as they are instead of embedding again."""
        await self._run(self._upsert, list(records), dict(vectors or {}))

    async def vectors(self, ids: Sequence[str]) -> dict[str, tuple[IndexedMemory, list[float]]]:
        """What the index holds for each of ``ids`` it has, with its dense vector."""
        found = await self._run(self._store.vectors, list(ids))
        return {pid: (to_indexed(pid, payload), vector) for pid, (payload, vector) in found.items()}

    async def packed_vectors(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """For each of ``ids`` the index holds: the content it was embedded from and its dense vector as
        little-endian float32 bytes (edge sync ships these instead of embedding again)."""
        return await self._run(self._store.packed_vectors, list(ids))

    async def purge(self, ids: Sequence[str]) -> None:
        """Delete these points whoever owns them (repair: index points no database row backs)."""
        await self._run(self._purge, list(ids))

    async def reset(self) -> None:
        """Drop every memory of every tenant and recreate an empty collection."""
        await self._run(self._reset)

    async def ids(self, *, user_id: str | None = None) -> set[str]:
        return await self._run(self._ids, user_id)

    async def count(self) -> int:
        return await self._run(self._count)

    async def relex(self) -> int:
        """Rewrite the lexical vectors written under an older ``lexical.SCHEME``; how many there were."""
        fixed: int = await self._run(self._store.relex)
        return fixed

    async def ping(self) -> None:
        await self._run(self._ping)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._store.close()
        self._memory.close()

    # --- synchronous implementation ---------------------------------------------------------------------------

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await anyio.to_thread.run_sync(functools.partial(self._guarded, fn, *args, **kwargs))

    def _guarded(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        with translate_errors():
            return fn(*args, **kwargs)

    def _add(
        self,
        user_id: str,
        content: str,
        visibility: str,
        scope: str,
        session: str | None,
        agent: str | None,
        tags: list[str],
        metadata: dict[str, Any],
        infer: bool,
        created_at: str | None = None,
        context: str = "",
        end_user: str | None = None,
    ) -> list[AddOutcome]:
        require_text(content, "content")
        fields: dict[str, Any] = {
            "end_user": end_user,
            "visibility": visibility,
            "scope": scope,
            "session": session,
            "agent": agent,
            "tags": clean_tags(tags),
            "meta": clean_metadata(metadata),
        }
        if created_at:
            fields["created_at"] = created_at
        if context:
            fields["context"] = context
        # run_id = visibility scopes mem0's infer context (the existing memories and recent messages it shows the LLM)
        # to what this write's readers may see; with user_id alone it would read across the user's sessions.
        result = self._memory.add(content, user_id=user_id, run_id=visibility, metadata=fields, infer=infer)
        return [
            AddOutcome(id=str(r["id"]), content=r["memory"], event=r.get("event", "ADD")) for r in result["results"]
        ]

    def _search(
        self,
        user_id: str,
        query: str,
        visibilities: list[str] | None,
        limit: int,
        threshold: float | None,
        tags: list[str] | None,
        metadata: Mapping[str, str | int | float | bool] | None,
        scope: str | None = None,
        entities: Mapping[str, Sequence[str]] | None = None,
    ) -> list[SearchHit]:
        if (visibilities is not None and not visibilities) or limit <= 0:
            return []
        if entities is not None and any(not values for values in entities.values()):
            return []  # a field narrowed to no name at all matches nothing
        from app.memories.vector_stores import SEARCH_LIMIT, read_filter

        filters = read_filter(user_id, visibilities, scope=scope, tags=tags, metadata=metadata, entities=entities)
        token = SEARCH_LIMIT.set(limit)
        tenant = SEARCHING_AS.set(user_id)
        try:
            result = self._memory.search(query, top_k=limit, filters=filters, threshold=threshold or 0.0)
        finally:
            SEARCHING_AS.reset(tenant)
            SEARCH_LIMIT.reset(token)
        return [to_hit(r) for r in result["results"]]

    def _get(self, user_id: str, memory_id: str) -> IndexedMemory | None:
        point = self._owned(user_id, memory_id)
        return None if point is None else to_indexed(point.id, point.payload)

    def _update(
        self, user_id: str, memory_id: str, content: str | None, tags: list[str] | None, metadata: dict[str, Any] | None
    ) -> None:
        # When the text stays, its vector too: mem0 would embed the text again (STORED_VECTOR).
        stored = self._owned_with_vector(user_id, memory_id) if content is None else None
        if stored is None and self._owned(user_id, memory_id) is None:
            raise NotFound("memory not found")
        if content is not None:
            require_text(content, "content")
        fields: dict[str, Any] = {}
        if tags is not None:
            fields["tags"] = clean_tags(tags)
        if metadata is not None:
            fields["meta"] = clean_metadata(metadata)
        if content is None and not fields:
            return
        token = STORED_VECTOR.set(stored)
        try:
            self._memory.update(memory_id, text=content, metadata=fields or None)
        except ValueError:
            if self._owned(user_id, memory_id) is None:  # deleted meanwhile
                raise NotFound("memory not found") from None
            raise
        finally:
            STORED_VECTOR.reset(token)

    def _delete(self, user_id: str, memory_id: str) -> None:
        if self._owned(user_id, memory_id) is None:
            raise NotFound("memory not found")
        try:
            self._memory.delete(memory_id)
        except ValueError:
            raise NotFound("memory not found") from None

    def _upsert(self, records: list[IndexedMemory], given: dict[str, Sequence[float]] | None = None) -> None:
        given = given or {}
        for record in records:
            if not is_uuid(record.id):
                raise ValidationFailed(f"memory id {record.id!r} is not a UUID")
            require_text(record.content, "content")
        for start in range(0, len(records), _UPSERT_CHUNK):
            chunk = records[start : start + _UPSERT_CHUNK]
            missing = [r.content for r in chunk if r.id not in given]
            embedded = iter(self._memory.embedding_model.embed_batch(missing, "add") if missing else [])
            vectors = [list(given[r.id]) if r.id in given else next(embedded) for r in chunk]
            self._memory.vector_store.insert(
                vectors=vectors, payloads=[to_payload(r) for r in chunk], ids=[r.id for r in chunk]
            )

    def _purge(self, ids: list[str]) -> None:
        for memory_id in ids:
            if is_uuid(memory_id):
                self._store.delete(memory_id)

    def _reset(self) -> None:
        with self._reset_lock, without_reset_notice():
            self._memory.reset()
            self._store = self._memory.vector_store

    def _ids(self, user_id: str | None) -> set[str]:
        return self._store.ids({"user_id": user_id} if user_id is not None else None)

    def _count(self) -> int:
        return self._store.count()

    def _ping(self) -> None:
        self._store.ping()

    def _owned_with_vector(self, user_id: str, memory_id: str) -> tuple[str, list[float]] | None:
        """The text and dense vector of the tenant's point ``memory_id``; None if absent, another tenant's, or
        without text or vector."""
        if not is_uuid(memory_id):
            return None
        found = self._store.vectors([memory_id]).get(memory_id)
        if found is None:
            return None
        payload, vector = found
        text = payload.get("data")
        if payload.get("user_id") != user_id or not isinstance(text, str):
            return None
        return text, vector

    def _owned(self, user_id: str, memory_id: str) -> Any:
        if not is_uuid(memory_id):
            return None
        point = self._store.get(memory_id)
        if point is None or point.payload.get("user_id") != user_id:
            return None
        return point


def _model_id(embedder: Embedder) -> str:
    named = getattr(embedder, "model_id", None)
    if isinstance(named, str) and named:
        return named
    kind = type(embedder)
    return f"{kind.__module__}.{kind.__qualname__}/{embedder.dims}"
