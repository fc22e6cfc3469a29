"""The Engram export format, ``engram-export`` version 1: JSON Lines, one object per line, UTF-8.

Line 1 is the header::

    {"format": "engram-export", "version": 1, "model": "<embedding model id>", "dims": 384,
     "user_id": "u_...", "session": null, "vectors": false, "exported_at": "2026-11-27T00:00:00+00:00"}

``model`` names the embedding model of the server that wrote the file; ``vectors`` says whether memory lines carry
their dense vector (``"vector"``: little-endian float32, base64). Every later line is one record with a ``type``:

- ``memory``: ``id`` (a UUID, kept across servers), ``content``, ``scope`` (user, session, agent, role),
  ``visibility`` (public, private) and ``visibility_key`` (the stored read key), ``session``, ``agent``, ``role``,
  ``end_user`` (the end user of an app the memory is about, as Mem0's ``user_id``),
  ``tags``, ``metadata`` (a document chunk's ``source`` is in it), ``created_at``, ``updated_at``, ``history`` (every
  event oldest first: ``event``, ``old_content``, ``new_content``, ``actor``, ``detail``, ``created_at``), and
  ``vector`` when asked for;
- ``document``: an indexed file of a session: ``session``, ``path``, ``origin``, ``content_hash``, ``size``,
  ``modified_at``, ``chunks``, ``chunking``, ``memory_ids`` (its chunks, which are memory lines), ``indexed_at``;
- ``agent``: an agent of a session: ``session``, ``agent``, ``role``, ``capabilities``, ``client``, ``joined_at``,
  ``left_at``, ``first_seen_at``, ``last_seen_at``;
- ``message``: ``id`` (the exporting server's, for ``reply_to``), ``session``, ``sender``, ``recipient``, ``kind``,
  ``content``, ``attachments``, ``reply_to``, ``created_at``, ``read_by`` (the agents that read it);
- ``task``: ``session``, ``task_id``, ``position``, ``description``, ``files``, ``status``, ``assignee``, ``result``,
  ``files_modified``, ``created_by``, ``created_at``, ``claimed_at``, ``completed_at``, ``deps`` (task ids).

Times are ISO 8601. A reader refuses a file whose header names another format or a newer version; unknown fields
within a record are ignored, so later versions may add fields without breaking version 1 readers.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from app.column_limits import MAX_INT32, MAX_INT64, MIN_INT64
from app.errors import AppError
from app.validation_words import in_words

FORMAT = "engram-export"
VERSION = 1
NAME = Annotated[str, Field(min_length=1, max_length=64)]


def _utc(value: datetime) -> datetime:
    """A time without an offset is read as UTC (the format always writes one)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


When = Annotated[datetime, AfterValidator(_utc)]


class MalformedLine(AppError):
    """A line of an import that is not a record of the format: the whole import is refused, naming the line."""

    status_code = 400
    code = "malformed_line"


class Header(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: str
    version: int
    model: str = ""
    dims: int = 0
    user_id: str | None = None
    session: str | None = None
    vectors: bool = False
    exported_at: When | None = None


# Every kind of history event this server writes (app.memories.events, app.sync.history).
EVENT_KINDS = Literal["ADD", "UPDATE", "DELETE", "PROMOTE", "CONFLICT"]


class Event(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event: EVENT_KINDS
    old_content: str | None = None
    new_content: str | None = None
    actor: str | None = Field(default=None, max_length=200)
    detail: str | None = Field(default=None, max_length=200)
    created_at: When


class MemoryLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["memory"]
    id: str = Field(min_length=1, max_length=36)
    content: str
    scope: Literal["user", "session", "agent", "role"]
    visibility: Literal["public", "private"] = "public"
    visibility_key: str | None = Field(default=None, max_length=140)
    session: NAME | None = None
    agent: NAME | None = None
    role: NAME | None = None
    end_user: str | None = Field(default=None, max_length=128)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: When
    updated_at: When
    history: list[Event] = Field(default_factory=list)
    vector: str | None = None


class DocumentLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["document"]
    session: NAME
    path: str = Field(min_length=1, max_length=512)
    origin: str = Field(max_length=16)
    content_hash: str = Field(max_length=64)
    size: int = Field(ge=0, le=MAX_INT32)
    modified_at: When | None = None
    chunks: int = Field(default=0, ge=0, le=MAX_INT32)
    chunking: int = Field(default=1, ge=1, le=MAX_INT32)
    memory_ids: list[str] = Field(default_factory=list)
    indexed_at: When


class AgentLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["agent"]
    session: NAME
    agent: NAME
    role: NAME | None = None
    capabilities: list[str] = Field(default_factory=list)
    client: str | None = Field(default=None, max_length=64)
    joined_at: When | None = None
    left_at: When | None = None
    first_seen_at: When
    last_seen_at: When


class MessageLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["message"]
    id: int = Field(ge=MIN_INT64, le=MAX_INT64)
    session: NAME
    sender: NAME
    recipient: str = Field(min_length=1, max_length=70)
    kind: str = Field(min_length=1, max_length=16)
    content: str
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    reply_to: int | None = Field(default=None, ge=MIN_INT64, le=MAX_INT64)
    created_at: When
    read_by: list[str] = Field(default_factory=list)


class TaskLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["task"]
    session: NAME
    task_id: NAME
    position: int = Field(ge=0, le=MAX_INT32)
    description: str
    files: list[str] = Field(default_factory=list)
    status: Literal["open", "in_progress", "completed"] = "open"
    assignee: str | None = Field(default=None, max_length=64)
    result: str | None = None
    files_modified: list[str] = Field(default_factory=list)
    created_by: NAME
    created_at: When
    claimed_at: When | None = None
    completed_at: When | None = None
    deps: list[str] = Field(default_factory=list)


Record = Annotated[
    MemoryLine | DocumentLine | AgentLine | MessageLine | TaskLine,
    Field(discriminator="type"),
]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)
TYPES = ("memory", "document", "agent", "message", "task")


def dump(obj: dict[str, Any]) -> str:
    """One line of the format (no newline)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} to an export")


def _object(number: int, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise MalformedLine(f"line {number}: not JSON ({exc.args[0] if exc.args else exc})", line=number) from None
    if not isinstance(value, dict):
        raise MalformedLine(f"line {number}: not a JSON object", line=number)
    return value


def parse_header(text: str) -> Header:
    """Line 1: this format, a version this reader knows."""
    value = _object(1, text)
    try:
        header = Header.model_validate(value)
    except ValidationError as exc:
        raise MalformedLine(
            f"line 1: not an {FORMAT} header ({in_words(exc, root='record', limit=5)})", line=1
        ) from None
    if header.format != FORMAT:
        raise MalformedLine(f"line 1: format {header.format!r} is not {FORMAT!r}", line=1)
    if header.version > VERSION or header.version < 1:
        raise MalformedLine(f"line 1: {FORMAT} version {header.version}; this server reads 1 to {VERSION}", line=1)
    return header


def parse_record(number: int, text: str) -> Record:
    """A record line; MalformedLine names the line and what is wrong with it."""
    value = _object(number, text)
    kind = value.get("type")
    if kind not in TYPES:
        raise MalformedLine(f"line {number}: type {kind!r} is not one of {', '.join(TYPES)}", line=number)
    try:
        return _RECORD.validate_python(value)
    except ValidationError as exc:
        raise MalformedLine(f"line {number}: {kind}: {in_words(exc, root='record', limit=5)}", line=number) from None


def pack_vector(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unpack_vector(text: str, dims: int) -> list[float] | None:
    """The floats of a ``vector`` field, or None when it is not ``dims`` little-endian float32s."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if len(raw) != 4 * dims:
        return None
    return list(struct.unpack(f"<{dims}f", raw))
