"""How a Mem0 memory and an Engram memory are one thing. Pure.

| Mem0          | Engram                                                                  |
| ------------- | ----------------------------------------------------------------------- |
| project       | the account (one API key's user)                                        |
| user_id       | ``end_user``: the end user of the account's app the memory is about     |
| run_id        | ``session``; a memory with a run_id has scope ``session``                |
| agent_id      | ``agent`` (in its run's session, or outside any session)                |
| app_id        | metadata key ``mem0_app_id``                                             |
| categories    | tags                                                                     |
| memory        | content                                                                  |
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.memories.schemas import MemoryOut, SearchResult

APP_ID_KEY = "mem0_app_id"


def _iso(value: datetime) -> str:
    return value.isoformat()


def split_metadata(metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """A stored memory's metadata as Mem0 shows it, and its app_id."""
    rest = dict(metadata or {})
    app_id = rest.pop(APP_ID_KEY, None)
    return (rest or None), (app_id if isinstance(app_id, str) else None)


def to_mem0(memory: MemoryOut | SearchResult, *, updated_at: datetime | None = None) -> dict[str, Any]:
    """One memory in the shape Mem0's API returns it."""
    metadata, app_id = split_metadata(memory.metadata)
    changed = (
        memory.updated_at if isinstance(memory, MemoryOut) else (updated_at or memory.updated_at or memory.created_at)
    )
    out: dict[str, Any] = {
        "id": memory.id,
        "memory": memory.content,
        "user_id": memory.end_user,
        "agent_id": memory.agent,
        "app_id": app_id,
        "run_id": memory.session,
        "hash": hashlib.md5(memory.content.encode()).hexdigest(),  # Mem0's content hash, not security
        "metadata": metadata,
        "categories": list(memory.tags),
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(changed),
        "expiration_date": None,
        "immutable": False,
        "structured_attributes": None,
    }
    if isinstance(memory, SearchResult):
        out["score"] = memory.score
    return out
