"""What a memory looks like in the index: the payload of a point, and how mem0's results map back to it."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.errors import ValidationFailed


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
    # The content of the memory written just before this one in the same place (``lexical``: neighbour context).
    context: str = ""
    # The end user of the account's app the memory is about (Mem0's user_id), or None.
    end_user: str | None = None
    updated_at: str = ""  # ISO 8601; empty where the index does not say


@dataclass(frozen=True, slots=True)
class SearchHit:
    id: str
    score: float
    memory: IndexedMemory


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def require_text(value: Any, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed(f"{name} must be non-empty text")


def clean_tags(tags: Sequence[str]) -> list[str]:
    if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
        raise ValidationFailed("tags must be a list of non-empty strings")
    return list(dict.fromkeys(tags))


def clean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise ValidationFailed("metadata must be an object with string keys")
    return dict(metadata)


def to_payload(record: IndexedMemory) -> dict[str, Any]:
    """The payload mem0's ``_create_memory`` would write, plus our fields."""
    from mem0.utils.lemmatization import lemmatize_for_bm25

    created_at = record.created_at or datetime.now(UTC).isoformat()
    return {
        "data": record.content,
        "hash": hashlib.md5(record.content.encode()).hexdigest(),  # mem0's dedup hash, not security
        "text_lemmatized": lemmatize_for_bm25(record.content),
        "created_at": created_at,
        "updated_at": record.updated_at or created_at,
        "role": "user",
        "user_id": record.user_id,
        "run_id": record.visibility,
        "visibility": record.visibility,
        "scope": record.scope,
        "session": record.session,
        "agent": record.agent,
        "tags": clean_tags(record.tags),
        "meta": clean_metadata(record.metadata),
        "context": record.context,
        "end_user": record.end_user,
    }


def to_hit(result: Mapping[str, Any]) -> SearchHit:
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
        end_user=extra.get("end_user"),
        updated_at=str(result.get("updated_at") or ""),
    )
    return SearchHit(id=memory.id, score=float(result["score"]), memory=memory)


def to_indexed(point_id: str, payload: Mapping[str, Any]) -> IndexedMemory:
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
        context=str(payload.get("context") or ""),
        end_user=payload.get("end_user"),
        updated_at=str(payload.get("updated_at") or ""),
    )
