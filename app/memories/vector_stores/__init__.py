"""mem0 vector-store adapters: Qdrant's engine in-process (``edge``) and a Qdrant server through qdrant-client
(``server``). Both accept the same filter dict and give it the same meaning (``filters.parse_filters``).

mem0 imports the store classes by their dotted path here (``engine._register_providers``).
"""

from __future__ import annotations

import os

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
from app.memories.vector_stores.server import ServerQdrantConfig, ServerQdrantStore

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
