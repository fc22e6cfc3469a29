"""mem0's plumbing: our embedder, stores and no-LLM stand-in registered in its factories, and its ``Memory`` built.

Pinned to mem0ai 2.2.1 internals: its factories' ``provider_to_class`` tables, the provider allow-lists in its
pydantic config classes (bypassed with ``model_construct``), ``EmbedderConfig.model_kwargs`` (carries our embedder
object), ``Memory._has_advanced_operators`` and ``Memory.llm.client``. Re-check all of them when upgrading mem0.
"""

from __future__ import annotations

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")

import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import AppError, ServiceUnavailable, ValidationFailed
from app.memories.embedder import Embedder
from app.memories.query_vectors import SEARCHING_AS, STORED_VECTOR, QueryVectors

if TYPE_CHECKING:
    from mem0 import Memory

log = logging.getLogger(__name__)

_EMBEDDER_PROVIDER = "engram_embedder"
_EDGE_PROVIDER = "engram_qdrant_edge"
_EDGE_PROCESS_PROVIDER = "engram_qdrant_edge_process"
_QDRANT_PROVIDER = "engram_qdrant"
_NO_LLM_PROVIDER = "engram_no_llm"
LLM_TIMEOUT_SECONDS = 60.0


def open_memory(
    *,
    data_dir: Path,
    embedder: Embedder,
    qdrant_url: str | None,
    qdrant_api_key: str | None,
    qdrant_local_path: Path | None,
    collection: str,
    llm_base_url: str | None,
    llm_api_key: str | None,
    llm_model: str,
    query_vectors: QueryVectors | None = None,
    index_process: bool = False,
) -> tuple[Memory, str]:
    """mem0's ``Memory`` over our embedder and the store the arguments choose, and that store's backend name.

    qdrant_url -> a Qdrant server; qdrant_local_path -> qdrant-client's local mode; else qdrant-edge, in a process of
    its own with ``index_process`` (``edge_process``).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    # mem0 writes a config.json under MEM0_DIR when first imported; keep it in our data dir, not ~/.mem0.
    os.environ.setdefault("MEM0_DIR", str((data_dir / "mem0").resolve()))
    from mem0.configs.base import MemoryConfig
    from mem0.embeddings.configs import EmbedderConfig
    from mem0.llms.configs import LlmConfig
    from mem0.vector_stores.configs import VectorStoreConfig

    from app.memories.vector_stores import EdgeStoreConfig, ServerQdrantConfig

    _register_providers()
    store_config: EdgeStoreConfig | ServerQdrantConfig
    if qdrant_url:
        backend, provider = "qdrant", _QDRANT_PROVIDER
        store_config = ServerQdrantConfig(collection_name=collection, url=qdrant_url, api_key=qdrant_api_key)
    elif qdrant_local_path is not None:
        backend, provider = "qdrant-local", _QDRANT_PROVIDER
        store_config = ServerQdrantConfig(collection_name=collection, path=str(qdrant_local_path))
    else:
        backend, provider = "qdrant-edge", _EDGE_PROCESS_PROVIDER if index_process else _EDGE_PROVIDER
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
            config={
                "embedding_dims": embedder.dims,
                "model_kwargs": {"engram_embedder": embedder, "engram_query_vectors": query_vectors},
            },
        ),
        vector_store=VectorStoreConfig.model_construct(provider=provider, config=store_config),
        llm=llm,
        # mem0's own message log (recent messages, for infer: it then only sees this process's); its history is
        # not kept at all (``_MessagesOnly``): Engram keeps the real history in its database.
        history_db_path=":memory:",
        reranker=None,
        version="v1.1",
        custom_instructions=None,
    )
    memory = _memory_class()(config)
    if llm_base_url:
        from openai import OpenAI

        # mem0's OpenAILLM silently prefers OPENROUTER_API_KEY from the environment over the configured base URL,
        # and the SDK defaults to a 10-minute timeout: use exactly what we were given, with a bound.
        memory.llm.client = OpenAI(
            api_key=llm_api_key or "unused", base_url=llm_base_url, timeout=LLM_TIMEOUT_SECONDS, max_retries=1
        )
    return memory, backend


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
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
def without_reset_notice() -> Iterator[None]:
    """mem0 warns "Resetting all memories" on every reset; ours are on purpose and their caller reports them."""
    mem0_log, notice = logging.getLogger("mem0.memory.main"), _ResetNotice()
    mem0_log.addFilter(notice)
    try:
        yield
    finally:
        mem0_log.removeFilter(notice)


# --- mem0's factory tables (2.2.1 internals) ----------------------------------------------------------------------


@functools.cache
def _register_providers() -> None:
    """Add our embedder, stores and the no-LLM stand-in to mem0's factory tables (once per process)."""
    from mem0.configs.llms.base import BaseLlmConfig
    from mem0.utils.factory import EmbedderFactory, LlmFactory, VectorStoreFactory

    EmbedderFactory.provider_to_class[_EMBEDDER_PROVIDER] = f"{__name__}._Mem0Embedder"
    VectorStoreFactory.provider_to_class[_EDGE_PROVIDER] = "app.memories.vector_stores.EdgeVectorStore"
    VectorStoreFactory.provider_to_class[_EDGE_PROCESS_PROVIDER] = (
        "app.memories.vector_stores.edge_process.EdgeIndexProcess"
    )
    VectorStoreFactory.provider_to_class[_QDRANT_PROVIDER] = "app.memories.vector_stores.ServerQdrantStore"
    LlmFactory.register_provider(_NO_LLM_PROVIDER, f"{__name__}._NoLlm", BaseLlmConfig)


@functools.cache
def _memory_class() -> type[Memory]:
    from mem0 import Memory

    class EngramMemory(Memory):
        # mem0 (re)creates its SQLite store in __init__ and reset(): whatever it makes is kept without its history.
        @property
        def db(self) -> Any:
            return self.__dict__.get("_engram_db")

        @db.setter
        def db(self, manager: Any) -> None:
            self.__dict__["_engram_db"] = None if manager is None else _MessagesOnly(manager)

        def _has_advanced_operators(self, filters: dict[str, Any]) -> bool:
            # mem0 would rewrite filters with operators before they reach the store, and in doing so merge the
            # conditions of an AND on one key into the last one ({"AND": [{"tags": "a"}, {"tags": "b"}]} becomes
            # {"tags": "b"}). Our stores parse the grammar themselves (vector_stores.parse_filters): pass it as is.
            return False

    return EngramMemory


class _MessagesOnly:
    """mem0's SQLite store without its history: Engram keeps every memory's history in its own database, and mem0's
    copy (one row per write, in memory, never pruned) only grew with every add for as long as the server ran. The
    recent-messages log mem0 gives infer as context stays (it keeps ten per scope)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    def add_history(self, *args: Any, **kwargs: Any) -> None:
        return None

    def batch_add_history(self, records: Any) -> None:
        return None

    def get_history(self, memory_id: str) -> list[dict[str, Any]]:
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)


def __getattr__(name: str) -> Any:
    # mem0's factories import provider classes by dotted path; define them on first use so importing this module
    # does not import mem0 (MEM0_DIR must be set first, in open_memory).
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
            self._queries: QueryVectors | None = config.model_kwargs.get("engram_query_vectors")

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            tenant = SEARCHING_AS.get()
            if memory_action == "search" and tenant is not None and self._queries is not None:
                return self._queries.vector(tenant, text, self._embedder.embed)
            stored = STORED_VECTOR.get()
            if memory_action == "update" and stored is not None and stored[0] == text:
                return list(stored[1])
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
