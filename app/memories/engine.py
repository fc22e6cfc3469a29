"""The memory engine: mem0's ``Memory`` over our embedder and vector store. The only door to mem0 and Qdrant.

Pinned to mem0ai 2.2.1 internals: its factories' ``provider_to_class`` tables, the provider allow-lists in its
pydantic config classes (bypassed with ``model_construct``), ``EmbedderConfig.model_kwargs`` (carries our embedder
object), ``Memory._has_advanced_operators`` and ``Memory.llm.client``. Re-check all of them when upgrading mem0.
"""

from __future__ import annotations

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")

import contextlib
import functools
import hashlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio.to_thread

from app.errors import AppError, NotFound, ServiceUnavailable, ValidationFailed
from app.memories.embedder import Embedder

if TYPE_CHECKING:
    from mem0 import Memory

    from app.memories.vector_stores import EdgeVectorStore, ServerQdrantStore

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_EMBEDDER_PROVIDER = "engram_embedder"
_EDGE_PROVIDER = "engram_qdrant_edge"
_QDRANT_PROVIDER = "engram_qdrant"
_NO_LLM_PROVIDER = "engram_no_llm"
_UPSERT_CHUNK = 256
LLM_TIMEOUT_SECONDS = 60.0


class IndexInUse(ServiceUnavailable):
    """Another process (usually a running server) has the embedded vector index open."""


@dataclass(frozen=True, slots=True)
class IndexedMemory:
    """What goes into / comes out of the index payload."""

    id: str
    user_id: str
    visibility: str
    scope: str
    session: str | None
    agent: str | None
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    created_at: str  # ISO 8601


@dataclass(frozen=True, slots=True)
class SearchHit:
    id: str
    score: float
    memory: IndexedMemory


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

    def __init__(self, memory: Memory, store: EdgeVectorStore | ServerQdrantStore, backend: str, infer: bool) -> None:
        self._memory = memory
        self._store = store
        self._backend = backend
        self._infer_available = infer
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
    ) -> MemoryEngine:
        """qdrant_url -> a Qdrant server; qdrant_local_path -> qdrant-client's local mode; else qdrant-edge."""
        data_dir.mkdir(parents=True, exist_ok=True)
        # mem0 writes a config.json under MEM0_DIR when first imported; keep it in our data dir, not ~/.mem0.
        os.environ.setdefault("MEM0_DIR", str((data_dir / "mem0").resolve()))
        from mem0.configs.base import MemoryConfig
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig
        from mem0.vector_stores.configs import VectorStoreConfig

        from app.memories.vector_stores import EdgeStoreConfig, IndexLocked, ServerQdrantConfig, StoreError

        _register_providers()
        store_config: EdgeStoreConfig | ServerQdrantConfig
        if qdrant_url:
            backend, provider = "qdrant", _QDRANT_PROVIDER
            store_config = ServerQdrantConfig(collection_name=collection, url=qdrant_url, api_key=qdrant_api_key)
        elif qdrant_local_path is not None:
            backend, provider = "qdrant-local", _QDRANT_PROVIDER
            store_config = ServerQdrantConfig(collection_name=collection, path=str(qdrant_local_path))
        else:
            backend, provider = "qdrant-edge", _EDGE_PROVIDER
            store_config = EdgeStoreConfig(collection_name=collection, path=str(data_dir / "qdrant-edge"))
        store_config.embedding_model_dims = embedder.dims

        if llm_base_url:
            llm = LlmConfig(
                provider="openai",
                config={"model": llm_model, "api_key": llm_api_key or "unused", "openai_base_url": llm_base_url},
            )
        else:
            llm = LlmConfig.model_construct(provider=_NO_LLM_PROVIDER, config={})
        # model_construct skips the provider allow-lists (MemoryConfig re-runs its children's validators, so it too);
        # the factories know our providers.
        config = MemoryConfig.model_construct(
            embedder=EmbedderConfig.model_construct(
                provider=_EMBEDDER_PROVIDER,
                config={"embedding_dims": embedder.dims, "model_kwargs": {"engram_embedder": embedder}},
            ),
            vector_store=VectorStoreConfig.model_construct(provider=provider, config=store_config),
            llm=llm,
            # mem0's own history and message log; Engram keeps the real history in its database.
            # In memory: mem0's history is a second, unbounded copy of ours, and writing it costs a disk sync per add.
            # (It also feeds recent messages to infer, which then only sees this process's.)
            history_db_path=":memory:",
            reranker=None,
            version="v1.1",
            custom_instructions=None,
        )
        try:
            memory = _memory_class()(config)
        except IndexLocked as exc:
            raise IndexInUse(str(exc)) from exc
        except StoreError as exc:
            raise ServiceUnavailable(f"memory index unavailable: {exc}") from exc
        if llm_base_url:
            from openai import OpenAI

            # mem0's OpenAILLM silently prefers OPENROUTER_API_KEY from the environment over the configured base URL,
            # and the SDK defaults to a 10-minute timeout: use exactly what we were given, with a bound.
            memory.llm.client = OpenAI(
                api_key=llm_api_key or "unused", base_url=llm_base_url, timeout=LLM_TIMEOUT_SECONDS, max_retries=1
            )
        return cls(memory, memory.vector_store, backend, infer=bool(llm_base_url))

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def infer_available(self) -> bool:
        return self._infer_available

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
    ) -> list[AddOutcome]:
        """Store ``content`` (or, with ``infer`` and an LLM configured, the facts an LLM extracts from it).

        Without an LLM, ``infer`` is ignored: the content is stored as given. ``created_at`` (ISO 8601) lets the
        index carry the same timestamp as the record.
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
    ) -> list[SearchHit]:
        """Best matches first among the tenant's memories with one of ``visibilities`` (None: all of the tenant's,
        for the owner's own view), all ``tags``, ``metadata`` and, when given, ``scope``."""
        return await self._run(self._search, user_id, query, visibilities, limit, threshold, tags, metadata, scope)

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

    async def upsert(self, records: Sequence[IndexedMemory]) -> None:
        """Embed in batches and write with the given ids (reindex/repair); existing points are replaced."""
        await self._run(self._upsert, list(records))

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
        with _translate_errors():
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
    ) -> list[AddOutcome]:
        _require_text(content, "content")
        fields: dict[str, Any] = {
            "visibility": visibility,
            "scope": scope,
            "session": session,
            "agent": agent,
            "tags": _clean_tags(tags),
            "meta": _clean_metadata(metadata),
        }
        if created_at:
            fields["created_at"] = created_at
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
    ) -> list[SearchHit]:
        if (visibilities is not None and not visibilities) or limit <= 0:
            return []
        filters: dict[str, Any] = {"user_id": user_id}
        if visibilities is not None:
            filters["visibility"] = {"in": list(visibilities)}
        if scope is not None:
            filters["scope"] = scope
        if tags:
            filters["AND"] = [{"tags": tag} for tag in _clean_tags(tags)]
        for key, value in (metadata or {}).items():
            if not isinstance(key, str) or not key or "." in key:
                raise ValidationFailed(f"invalid metadata filter key {key!r}")
            filters[f"meta.{key}"] = value
        from app.memories.vector_stores import SEARCH_LIMIT

        token = SEARCH_LIMIT.set(limit)
        try:
            result = self._memory.search(query, top_k=limit, filters=filters, threshold=threshold or 0.0)
        finally:
            SEARCH_LIMIT.reset(token)
        return [_to_hit(r) for r in result["results"]]

    def _get(self, user_id: str, memory_id: str) -> IndexedMemory | None:
        point = self._owned(user_id, memory_id)
        return None if point is None else _to_indexed(point.id, point.payload)

    def _update(
        self, user_id: str, memory_id: str, content: str | None, tags: list[str] | None, metadata: dict[str, Any] | None
    ) -> None:
        if self._owned(user_id, memory_id) is None:
            raise NotFound("memory not found")
        if content is not None:
            _require_text(content, "content")
        fields: dict[str, Any] = {}
        if tags is not None:
            fields["tags"] = _clean_tags(tags)
        if metadata is not None:
            fields["meta"] = _clean_metadata(metadata)
        if content is None and not fields:
            return
        try:
            self._memory.update(memory_id, text=content, metadata=fields or None)
        except ValueError:
            if self._owned(user_id, memory_id) is None:  # deleted meanwhile
                raise NotFound("memory not found") from None
            raise

    def _delete(self, user_id: str, memory_id: str) -> None:
        if self._owned(user_id, memory_id) is None:
            raise NotFound("memory not found")
        try:
            self._memory.delete(memory_id)
        except ValueError:
            raise NotFound("memory not found") from None

    def _upsert(self, records: list[IndexedMemory]) -> None:
        for record in records:
            if not _is_uuid(record.id):
                raise ValidationFailed(f"memory id {record.id!r} is not a UUID")
            _require_text(record.content, "content")
        for start in range(0, len(records), _UPSERT_CHUNK):
            chunk = records[start : start + _UPSERT_CHUNK]
            vectors = self._memory.embedding_model.embed_batch([r.content for r in chunk], "add")
            self._memory.vector_store.insert(
                vectors=vectors, payloads=[_to_payload(r) for r in chunk], ids=[r.id for r in chunk]
            )

    def _purge(self, ids: list[str]) -> None:
        for memory_id in ids:
            if _is_uuid(memory_id):
                self._store.delete(memory_id)

    def _reset(self) -> None:
        with self._reset_lock, _without_reset_notice():
            self._memory.reset()
            self._store = self._memory.vector_store

    def _ids(self, user_id: str | None) -> set[str]:
        return self._store.ids({"user_id": user_id} if user_id is not None else None)

    def _count(self) -> int:
        return self._store.count()

    def _ping(self) -> None:
        self._store.ping()

    def _owned(self, user_id: str, memory_id: str) -> Any:
        if not _is_uuid(memory_id):
            return None
        point = self._store.get(memory_id)
        if point is None or point.payload.get("user_id") != user_id:
            return None
        return point


# --- helpers ------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _translate_errors() -> Iterator[None]:
    """mem0's complaints about input -> ValidationFailed; the store or the LLM failing -> ServiceUnavailable."""
    from mem0.exceptions import LLMError
    from mem0.exceptions import ValidationError as Mem0ValidationError
    from pydantic import ValidationError as PydanticValidationError

    from app.memories.vector_stores import StoreError

    try:
        yield
    except AppError:
        raise
    except StoreError as exc:
        log.warning("memory index failure: %s", exc)
        raise ServiceUnavailable("the memory index is unavailable") from exc
    except LLMError as exc:
        log.warning("fact extraction failed: %s", exc)
        raise ServiceUnavailable("fact extraction (LLM) failed; retry, or add with infer=false") from exc
    except (ValueError, Mem0ValidationError, PydanticValidationError) as exc:
        raise ValidationFailed(str(getattr(exc, "message", None) or exc)) from exc
    except Exception as exc:
        log.exception("memory engine failure")
        raise ServiceUnavailable("the memory engine failed") from exc


class _ResetNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Resetting all memories"


@contextlib.contextmanager
def _without_reset_notice() -> Iterator[None]:
    """mem0 warns "Resetting all memories" on every reset; ours are on purpose and their caller reports them."""
    mem0_log, notice = logging.getLogger("mem0.memory.main"), _ResetNotice()
    mem0_log.addFilter(notice)
    try:
        yield
    finally:
        mem0_log.removeFilter(notice)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _require_text(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed(f"{name} must be non-empty text")


def _clean_tags(tags: Sequence[str]) -> list[str]:
    if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
        raise ValidationFailed("tags must be a list of non-empty strings")
    return list(dict.fromkeys(tags))


def _clean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise ValidationFailed("metadata must be an object with string keys")
    return dict(metadata)


def _to_payload(record: IndexedMemory) -> dict[str, Any]:
    """The payload mem0's ``_create_memory`` would write, plus our fields."""
    from mem0.utils.lemmatization import lemmatize_for_bm25

    created_at = record.created_at or datetime.now(UTC).isoformat()
    return {
        "data": record.content,
        "hash": hashlib.md5(record.content.encode()).hexdigest(),  # mem0's dedup hash, not security
        "text_lemmatized": lemmatize_for_bm25(record.content),
        "created_at": created_at,
        "updated_at": created_at,
        "role": "user",
        "user_id": record.user_id,
        "run_id": record.visibility,
        "visibility": record.visibility,
        "scope": record.scope,
        "session": record.session,
        "agent": record.agent,
        "tags": _clean_tags(record.tags),
        "meta": _clean_metadata(record.metadata),
    }


def _to_hit(result: Mapping[str, Any]) -> SearchHit:
    """A mem0 search result: mem0 promotes ``user_id`` and ``created_at`` and folds our fields into ``metadata``."""
    extra = result.get("metadata") or {}
    memory = IndexedMemory(
        id=str(result["id"]),
        user_id=str(result.get("user_id", "")),
        visibility=str(extra.get("visibility", "")),
        scope=str(extra.get("scope", "")),
        session=extra.get("session"),
        agent=extra.get("agent"),
        content=str(result.get("memory", "")),
        tags=list(extra.get("tags") or []),
        metadata=dict(extra.get("meta") or {}),
        created_at=str(result.get("created_at", "")),
    )
    return SearchHit(id=memory.id, score=float(result["score"]), memory=memory)


def _to_indexed(point_id: str, payload: Mapping[str, Any]) -> IndexedMemory:
    return IndexedMemory(
        id=point_id,
        user_id=str(payload.get("user_id", "")),
        visibility=str(payload.get("visibility", "")),
        scope=str(payload.get("scope", "")),
        session=payload.get("session"),
        agent=payload.get("agent"),
        content=str(payload.get("data", "")),
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("meta") or {}),
        created_at=str(payload.get("created_at", "")),
    )


# --- mem0 wiring (2.2.1 internals) --------------------------------------------------------------------------------


@functools.cache
def _register_providers() -> None:
    """Add our embedder, stores and the no-LLM stand-in to mem0's factory tables (once per process)."""
    from mem0.configs.llms.base import BaseLlmConfig
    from mem0.utils.factory import EmbedderFactory, LlmFactory, VectorStoreFactory

    EmbedderFactory.provider_to_class[_EMBEDDER_PROVIDER] = f"{__name__}._Mem0Embedder"
    VectorStoreFactory.provider_to_class[_EDGE_PROVIDER] = "app.memories.vector_stores.EdgeVectorStore"
    VectorStoreFactory.provider_to_class[_QDRANT_PROVIDER] = "app.memories.vector_stores.ServerQdrantStore"
    LlmFactory.register_provider(_NO_LLM_PROVIDER, f"{__name__}._NoLlm", BaseLlmConfig)


@functools.cache
def _memory_class() -> type[Memory]:
    from mem0 import Memory

    class EngramMemory(Memory):
        def _has_advanced_operators(self, filters: dict[str, Any]) -> bool:
            # mem0 would rewrite filters with operators before they reach the store, and in doing so merge the
            # conditions of an AND on one key into the last one ({"AND": [{"tags": "a"}, {"tags": "b"}]} becomes
            # {"tags": "b"}). Our stores parse the grammar themselves (vector_stores.parse_filters): pass it as is.
            return False

    return EngramMemory


def __getattr__(name: str) -> Any:
    # mem0's factories import provider classes by dotted path; define them on first use so importing this module
    # does not import mem0 (MEM0_DIR must be set first, in MemoryEngine.open).
    if name == "_Mem0Embedder":
        return _mem0_embedder_class()
    if name == "_NoLlm":
        return _no_llm_class()
    raise AttributeError(name)


@functools.cache
def _mem0_embedder_class() -> type:
    from mem0.embeddings.base import EmbeddingBase

    class Mem0Embedder(EmbeddingBase):
        """mem0's embedder interface over ours; the instance rides in ``config.model_kwargs``."""

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self._embedder: Embedder = config.model_kwargs["engram_embedder"]

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return self._embedder.embed(text)

        def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
            return self._embedder.embed_batch(texts)

    return Mem0Embedder


@functools.cache
def _no_llm_class() -> type:
    from mem0.llms.base import LLMBase

    class NoLlm(LLMBase):
        """Stands in when no LLM is configured: mem0 needs one to start, and the engine never asks it anything."""

        def generate_response(self, *args: Any, **kwargs: Any) -> str:
            raise RuntimeError("no LLM is configured (set ENGRAM_LLM_BASE_URL to enable infer)")

    return NoLlm
