"""Request and response shapes of the memory API, shared by REST and MCP."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.column_limits import MAX_INT64
from app.identity import MAX_NAME, NAME_PATTERN
from app.json_body import JsonIn
from app.memories.lexical import DOCUMENT_KIND
from app.memories.scopes import Scope, Visibility
from app.text import (
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    NO_NUL_SCHEMA,
    NOT_BLANK_SCHEMA,
    pydantic_metadata,
    pydantic_text,
)

# Every stored text field goes through the one rule of app.text; REST and MCP use these same types.
Text = Annotated[str, AfterValidator(pydantic_text), Field(json_schema_extra=NO_NUL_SCHEMA)]
Tag = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64),
    AfterValidator(pydantic_text),
    Field(json_schema_extra=NOT_BLANK_SCHEMA),
]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)]
# The end user of the account's app a memory is about (Mem0's user_id): free text, since apps use emails and ids.
MAX_END_USER = 128
EndUser = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_END_USER), AfterValidator(pydantic_text)
]
MetadataText = Annotated[str, Field(json_schema_extra=NO_NUL_SCHEMA)]
MetadataValue = MetadataText | int | float | bool | None
# What app.text.metadata_problem checks of the keys, as the schema says it (the total size it checks too is not said).
METADATA_KEYS: dict[str, Any] = {
    "maxProperties": MAX_METADATA_KEYS,
    "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_CHARS, "pattern": '^[^."\\\\\\x00]*$'},
}
Metadata = Annotated[
    dict[str, MetadataValue], AfterValidator(pydantic_metadata), Field(json_schema_extra=METADATA_KEYS)
]
MAX_TAGS = 20


class _In(JsonIn):
    """A request body."""


def _unique_tags(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))


# Rules between fields, stated in the schema so that a client (or a fuzzer) can tell a request the API will refuse.
def needs_string(field: str, *, when: dict[str, Any]) -> dict[str, Any]:
    """``field`` must be a string whenever the property in ``when`` is present and matches its schema."""
    return {
        "anyOf": [
            {"properties": {name: {"not": schema} for name, schema in when.items()}},
            {"required": [field], "properties": {field: {"type": "string"}}},
        ]
    }


AGENT_NEEDS_SESSION = needs_string("session", when={"agent": {"type": "string"}})
# What app.memories.scopes.visibility_key asks of a write (a role, for scope role, the session's state decides).
SCOPE_NEEDS: dict[str, Any] = {
    "allOf": [
        AGENT_NEEDS_SESSION,
        needs_string("session", when={"scope": {"const": "session"}}),
        needs_string("agent", when={"scope": {"const": "agent"}}),
    ]
}


class MemoryIn(_In):
    model_config = ConfigDict(json_schema_extra=SCOPE_NEEDS)

    content: Text = Field(
        min_length=1,
        description="The memory text, stored verbatim unless infer is true.",
        json_schema_extra=NOT_BLANK_SCHEMA,
    )
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    metadata: Metadata = Field(
        default_factory=dict,
        description=f"String, number, boolean or null values under at most {MAX_METADATA_KEYS} keys without '.'.",
    )
    session: Name | None = None
    agent: Name | None = None
    end_user: EndUser | None = Field(
        default=None,
        description="The end user of your app this memory is about (Mem0's user_id); a filter, not a reader.",
    )
    scope: Scope | None = Field(
        default=None, description="user, session, agent or role; defaults to session in a session."
    )
    visibility: Visibility = Field(
        default="public", description="private: only the agent that writes it reads it, whatever the scope."
    )
    infer: bool = Field(default=False, description="Extract facts with the configured LLM instead of storing verbatim.")

    _tags = field_validator("tags")(_unique_tags)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("content must not be blank")
        return content


class MemoryBatchIn(_In):
    memories: list[MemoryIn] = Field(min_length=1)


class MemoryPatch(_In):
    # Something to change: at least one field, and not null.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
                for name in ("content", "tags", "metadata", "scope", "visibility")
            ]
        }
    )

    content: Text | None = Field(default=None, min_length=1)
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    metadata: Metadata | None = None
    scope: Scope | None = Field(
        default=None, description="Widen the scope (agent -> session, role or user; session or role -> user)."
    )
    visibility: Visibility | None = Field(default=None, description="'public' makes a private memory public.")

    @field_validator("tags")
    @classmethod
    def _tags_unique(cls, tags: list[str] | None) -> list[str] | None:
        return None if tags is None else _unique_tags(tags)


class SearchIn(_In):
    model_config = ConfigDict(json_schema_extra=AGENT_NEEDS_SESSION)

    query: str = Field(min_length=1, max_length=4000)
    limit: int = Field(default=10, ge=1, le=100)
    session: Name | None = None
    agent: Name | None = None
    tags: list[Tag] | None = Field(default=None, description="Only memories that carry all of these tags.")
    metadata: (
        Annotated[
            dict[str, MetadataText | int | float | bool],
            AfterValidator(pydantic_metadata),
            Field(json_schema_extra=METADATA_KEYS),
        ]
        | None
    ) = Field(default=None, description="Equality filters.")
    end_user: EndUser | None = Field(default=None, description="Only memories about this end user of your app.")
    threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Minimum relevance score (0-1). Unset: the server's default (0.05), which drops unrelated "
        "memories; 0 returns every match.",
    )


Source = Annotated[
    str | None,
    Field(description="For a chunk of an indexed document: its file and heading path, e.g. 'README.md > Deploy'."),
]


def source_of(metadata: dict[str, Any] | None) -> str | None:
    """Where an indexed document chunk came from; None for any other memory."""
    if not metadata or metadata.get("kind") != DOCUMENT_KIND:
        return None
    source = metadata.get("source") or metadata.get("path")
    return source if isinstance(source, str) else None


class MemoryOut(BaseModel):
    id: str
    content: str
    scope: Scope
    visibility: Visibility = "public"
    role: str | None = None
    tags: list[str]
    metadata: dict[str, Any]
    session: str | None
    agent: str | None
    end_user: str | None = None
    created_at: datetime
    updated_at: datetime
    source: Source = None


class CreatedMemory(MemoryOut):
    event: str = "ADD"


class SearchResult(BaseModel):
    id: str
    content: str
    score: float
    scope: Scope
    visibility: Visibility = "public"
    tags: list[str]
    metadata: dict[str, Any]
    session: str | None
    agent: str | None
    end_user: str | None = None
    created_at: datetime
    # When its content, tags or metadata last changed (as the index says: equal to created_at until then).
    updated_at: datetime | None = None
    source: Source = None


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
    detail: str | None = Field(default=None, description="What a PROMOTE changed, e.g. 'scope: session -> user'.")


# A memory's history comes a page at a time: losing sync versions and edits can make it long.
HISTORY_PAGE = 100
MAX_HISTORY_PAGE = 1000
# The largest event id: memory_events.id is a 64-bit integer. A larger cursor is the caller's mistake, not a value
# to hand the driver (SQLite's OverflowError and asyncpg's DataError past 64 bits: a 500).
MAX_EVENT_ID = MAX_INT64


class HistoryResponse(BaseModel):
    memory_id: str
    history: list[HistoryEntry]
    next: int | None = Field(
        default=None, description="Pass as `after` for the next page of the history; null when this page is its end."
    )


class Topic(BaseModel):
    tag: str
    count: int


class MemoryCounts(BaseModel):
    """How many live memories the owner has, in all and per session, scope and tag (most first)."""

    total: int
    sessions: dict[str, int]
    scopes: dict[str, int]
    tags: dict[str, int]


class TopicsResponse(BaseModel):
    topics: list[Topic]
