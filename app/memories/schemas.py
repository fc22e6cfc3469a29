"""Request and response shapes of the memory API, shared by REST and MCP."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.memories.scopes import Scope

Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
MetadataValue = str | int | float | bool | None
MAX_TAGS = 20
MAX_METADATA_KEYS = 50


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unique_tags(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))


def _check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValueError(f"at most {MAX_METADATA_KEYS} metadata keys")
    for key in metadata:
        if not key or len(key) > 64 or "." in key:
            raise ValueError(f"metadata key {key!r} must be 1-64 characters without '.'")
    return metadata


class MemoryIn(_In):
    content: str = Field(min_length=1, description="The memory text, stored verbatim unless infer is true.")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    session: Name | None = None
    agent: Name | None = None
    scope: Scope | None = Field(default=None, description="user, session or agent; defaults to session in a session.")
    infer: bool = Field(default=False, description="Extract facts with the configured LLM instead of storing verbatim.")

    _tags = field_validator("tags")(_unique_tags)
    _metadata = field_validator("metadata")(_check_metadata)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("content must not be blank")
        return content


class MemoryBatchIn(_In):
    memories: list[MemoryIn] = Field(min_length=1)


class MemoryPatch(_In):
    content: str | None = Field(default=None, min_length=1)
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    metadata: dict[str, MetadataValue] | None = None

    @field_validator("tags")
    @classmethod
    def _tags_unique(cls, tags: list[str] | None) -> list[str] | None:
        return None if tags is None else _unique_tags(tags)

    @field_validator("metadata")
    @classmethod
    def _metadata_ok(cls, metadata: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if metadata is None else _check_metadata(metadata)


class SearchIn(_In):
    query: str = Field(min_length=1, max_length=4000)
    limit: int = Field(default=10, ge=1, le=100)
    session: Name | None = None
    agent: Name | None = None
    tags: list[Tag] | None = Field(default=None, description="Only memories that carry all of these tags.")
    metadata: dict[str, str | int | float | bool] | None = Field(default=None, description="Equality filters.")
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description="Minimum similarity score.")


class MemoryOut(BaseModel):
    id: str
    content: str
    scope: Scope
    tags: list[str]
    metadata: dict[str, Any]
    session: str | None
    agent: str | None
    created_at: datetime
    updated_at: datetime


class CreatedMemory(MemoryOut):
    event: str = "ADD"


class SearchResult(BaseModel):
    id: str
    content: str
    score: float
    scope: Scope
    tags: list[str]
    metadata: dict[str, Any]
    session: str | None
    agent: str | None
    created_at: datetime


class SearchResponse(BaseModel):
    results: list[SearchResult]


class BatchResponse(BaseModel):
    results: list[CreatedMemory]


class MemoryPage(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None


class HistoryEntry(BaseModel):
    event: str
    old_content: str | None
    new_content: str | None
    actor: str | None
    created_at: datetime


class HistoryResponse(BaseModel):
    memory_id: str
    history: list[HistoryEntry]


class Topic(BaseModel):
    tag: str
    count: int


class TopicsResponse(BaseModel):
    topics: list[Topic]
