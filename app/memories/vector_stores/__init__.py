"""mem0 vector-store adapters: Qdrant's engine in-process (``edge``), or in a process of its own (``edge_process``),
and a Qdrant server through qdrant-client (``server``). All accept the same filter dict and give it the same meaning
(``filters.parse_filters``).

mem0 imports the store classes by their dotted path here (``mem0_wiring._register_providers``). The server store is
imported on first use: the embedded index's own process imports this package and has no use for qdrant-client (half
a second of its start).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# mem0 reads this when it is first imported; the stores import it.
os.environ.setdefault("MEM0_TELEMETRY", "False")

from app.memories.vector_stores.base import (
    KEYWORD_FIELDS,
    SCROLL_PAGE,
    SEARCH_LIMIT,
    TENANT_FIELD,
    IndexLocked,
    StoredPoint,
    StoreError,
    wanted,
)
from app.memories.vector_stores.edge import EdgeStoreConfig, EdgeVectorStore
from app.memories.vector_stores.filters import (
    Condition,
    FilterError,
    parse_filters,
    read_filter,
    to_client_filter,
    to_edge_filter,
)

if TYPE_CHECKING:
    from app.memories.vector_stores.server import ServerQdrantConfig, ServerQdrantStore

_LAZY = {"ServerQdrantConfig", "ServerQdrantStore"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from app.memories.vector_stores import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "KEYWORD_FIELDS",
    "SCROLL_PAGE",
    "SEARCH_LIMIT",
    "TENANT_FIELD",
    "Condition",
    "EdgeStoreConfig",
    "EdgeVectorStore",
    "FilterError",
    "IndexLocked",
    "ServerQdrantConfig",
    "ServerQdrantStore",
    "StoreError",
    "StoredPoint",
    "parse_filters",
    "read_filter",
    "to_client_filter",
    "to_edge_filter",
    "wanted",
]
