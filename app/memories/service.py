"""The memory rules, written once for REST and MCP: scopes, limits, tenant isolation, ordering of writes.

The database is the record; the vector index is derived from it. A write is acknowledged only after both hold it,
so an acknowledged write survives a crash, and the index can always be rebuilt from the database (``reindex``).
Writes go index-first because mem0 chooses the memory ids; a failed database commit removes what was indexed.

MemoryService is put together from one class per concern: ``writes`` (add, replace, import), ``edits`` (update,
promotion, delete), ``reads`` (search, list, get, topics, counts), ``history`` and ``repair``; ``service_base`` holds
what they share.
"""

from __future__ import annotations

from app.memories.edits import MemoryEdits
from app.memories.history import MemoryHistory
from app.memories.reads import MemoryReads
from app.memories.repair import MemoryRepair
from app.memories.service_base import Limits, RoleLookup, resolve_identity
from app.memories.writes import MemoryWrites

# Callers import these from here (app.assembly: Limits; app.mem0compat: resolve_identity), wherever they are written.
__all__ = ["Limits", "MemoryService", "RoleLookup", "resolve_identity"]


class MemoryService(MemoryWrites, MemoryEdits, MemoryReads, MemoryHistory, MemoryRepair):
    """Memory operations on behalf of a principal. Created once; holds the database and the index."""
