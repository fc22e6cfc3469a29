"""What both vector stores share: their errors, the point they hand back to mem0, and the fields every read uses."""

from __future__ import annotations

import struct
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.memories import lexical
from app.memories.vector_stores.hybrid import KIND_FIELD

# How many hits the caller of a search wants. mem0 over-fetches (max(4 x limit, 60)) to fuse BM25 and entity scores,
# which these stores do not provide, so anything past the caller's limit would only cost payload reads. The engine
# sets it around each search; the stores honour it (same thread: mem0 calls the store synchronously).
SEARCH_LIMIT: ContextVar[int | None] = ContextVar("engram_search_limit", default=None)


def wanted(top_k: int) -> int:
    hint = SEARCH_LIMIT.get()
    return min(top_k, hint) if hint else top_k


# Payload fields every read filters on; user_id is the tenant (whose words the lexical vectors are, ``lexical``).
TENANT_FIELD = lexical.TENANT_FIELD
# With ``meta.kind``, which the fused score reads for every candidate of a search (``hybrid``): indexed, that is a
# lookup instead of a read of the candidate's payload, and a search on the embedded store was 3x faster (5.2 ms to
# 1.6 ms at 500 points, all of it holding the GIL).
KEYWORD_FIELDS = ("visibility", "tags", "scope", KIND_FIELD)
SCROLL_PAGE = 1000


class StoreError(RuntimeError):
    """The vector store itself failed (I/O, closed, unreachable)."""


class IndexLocked(StoreError):
    """Another process has the embedded index open (qdrant-edge: one process per data path)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the vector index at {path} is in use by another process")
        self.path = path


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """What the adapters hand back to mem0: it reads ``id``, ``score`` and ``payload``."""

    id: str
    payload: dict[str, Any]
    score: float | None = None


def pack_vector(vector: Any) -> bytes | None:
    """A dense vector as little-endian float32 bytes (how edge sync ships it), or None when it is not one.

    ``struct`` packs a 384-float list in a third of the time a numpy round trip takes, and refuses anything but
    numbers; edge sync reads back a whole batch of vectors for every push and pull."""
    if not isinstance(vector, list) or not vector:
        return None
    try:
        return struct.pack(f"<{len(vector)}f", *vector)
    except (struct.error, TypeError, OverflowError):
        return None


def valid_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
