"""The sync protocol's messages (``POST /sync/v1/push``, ``GET /sync/v1/pull``) and their cursors.

A change carries the version it writes (``hlc``, ``origin``), the operation and the whole record; ``change_id`` is
derived from the version, so sending a change twice is sending the same version twice, which is applied once.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import msgspec
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sqlalchemy import Row

from app.column_limits import MAX_INT64
from app.errors import Conflict, ValidationFailed
from app.identity import Identity
from app.json_body import JsonIn, JsonTime
from app.memories.models import MemoryRecord, NewMemory
from app.memories.schemas import MAX_TAGS, SCOPE_NEEDS, EndUser, MemoryIn, Metadata, Name, Tag, Text, needs_string
from app.memories.scopes import PRIVATE_PREFIX, Scope, Visibility, visibility_key
from app.sync import hlc as hlc_codec
from app.text import NOT_BLANK_SCHEMA

NODE_ID = r"^[A-Za-z0-9_.:-]{1,40}$"
MAX_BATCH = 1000
# The largest push body an edge takes. A batch of a thousand changes with their vectors is a few megabytes.
MAX_PUSH_BYTES = 16 * 1024 * 1024
MAX_VECTOR_CHARS = 65_536
_CHANGE_NAMESPACE = uuid.UUID("6f1c3f0e-5b2a-4c59-9f55-2d1f5f3b7a10")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

Op = Literal["upsert", "delete"]


def change_id(memory_id: str, hlc: int, origin: str, op: str) -> str:
    """The same version always gets the same id: re-sending it is harmless."""
    return str(uuid.uuid5(_CHANGE_NAMESPACE, f"{memory_id}/{hlc}/{origin}/{op}"))


class _Strict(JsonIn):
    """A message of the protocol."""


class RecordWire(_Strict):
    # A local write's rules (the validator below applies them), stated with the same types for the schema.
    model_config = ConfigDict(
        json_schema_extra={"allOf": [SCOPE_NEEDS, needs_string("role", when={"scope": {"const": "role"}})]}
    )

    content: Text = Field(min_length=1, json_schema_extra=NOT_BLANK_SCHEMA)
    scope: Scope
    session: Name | None = None
    agent: Name | None = None
    # The role a memory of scope "role" is for; private: only its writer (session and agent) reads it.
    role: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    visibility: Visibility = "public"
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    metadata: Metadata = Field(default_factory=dict)
    created_at: Annotated[AwareDatetime, JsonTime]
    updated_at: Annotated[AwareDatetime, JsonTime]
    # The end user of the account's app (Mem0's user_id); sent only when set, so a peer from before it takes the rest.
    end_user: EndUser | None = None

    @model_validator(mode="after")
    def _same_rules_as_a_local_write(self) -> RecordWire:
        # One rule for every stored text: a synced record passes exactly what a REST or MCP write would.
        try:
            checked = MemoryIn(
                content=self.content,
                tags=self.tags,
                metadata=self.metadata,
                session=self.session,
                agent=self.agent,
                scope=self.scope,
                visibility=self.visibility,
                end_user=self.end_user,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "record"
            raise ValueError(f"{where}: {first.get('msg')}") from None
        self.tags = list(checked.tags)
        self.metadata = dict(checked.metadata)
        # An agent outside any session writes only memories of scope user (Mem0's agent_id without a run_id).
        if self.agent is not None and self.session is None and self.scope != "user":
            raise ValueError("agent needs a session")
        try:  # a scope that its session, agent and role can carry
            self.key("-")
        except (ValidationFailed, Conflict) as exc:
            raise ValueError(exc.message) from None
        return self

    def key(self, user_id: str) -> str:
        """The visibility key this record is stored under for ``user_id``."""
        who = Identity(user_id, self.session, self.agent)
        return visibility_key(self.scope, who, role=self.role, visibility=self.visibility)


class VectorWire(_Strict):
    model: str = Field(min_length=1, max_length=200)
    # Little-endian float32, base64.
    data: str = Field(max_length=MAX_VECTOR_CHARS)

    def floats(self) -> list[float] | None:
        """The vector, or None when it is not a finite float32 array (the receiver then embeds again)."""
        try:
            raw = base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError):
            return None
        if not raw or len(raw) % 4:
            return None
        floats = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        # A NaN or an infinity makes the sum one too, and float32 values this many cannot overflow a float sum; a
        # numpy reduction cost more than the decoding (a receiver decodes every vector of a batch).
        if not math.isfinite(sum(floats)):
            return None
        return floats


def encode_vector(model: str, vector: list[float]) -> VectorWire:
    import numpy as np  # here, not at the top: `engram sync status` reads this module and needs no numpy

    return VectorWire(**packed_vector(model, np.asarray(vector, dtype="<f4").tobytes()))


# What a sender builds: the JSON form of ``ChangeWire`` as plain dicts, encoded with msgspec. Building pydantic models
# to send (even unvalidated, with ``model_construct``) cost a sender about 30 µs a change, more than reading it.


class SentVector(TypedDict):
    model: str
    data: str


class SentRecordFields(TypedDict):
    content: str
    scope: str
    session: str | None
    agent: str | None
    role: str | None
    visibility: str
    tags: list[str]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    end_user: NotRequired[str]


class SentChange(TypedDict):
    change_id: str
    memory_id: str
    hlc: str
    origin: str
    op: Op
    record: SentRecordFields
    vector: SentVector | None


def packed_vector(model: str, packed: bytes) -> SentVector:
    """A vector already packed as little-endian float32 bytes (``MemoryEngine.packed_vectors``)."""
    return {"model": model, "data": base64.b64encode(packed).decode()}


def encode_json(body: Any) -> bytes:
    """A push or pull body as JSON (datetimes as RFC 3339)."""
    return msgspec.json.encode(body)


class ChangeWire(_Strict):
    change_id: str = Field(min_length=1, max_length=64)
    memory_id: str = Field(pattern=_UUID.pattern)
    hlc: str = Field(max_length=24, json_schema_extra={"pattern": hlc_codec.WIRE_PATTERN})
    origin: str = Field(pattern=NODE_ID)
    op: Op
    record: RecordWire
    vector: VectorWire | None = None

    @field_validator("hlc")
    @classmethod
    def _hlc(cls, value: str) -> str:
        try:
            hlc_codec.decode(value)
        except ValidationFailed as exc:
            raise ValueError(exc.message) from None
        return value

    @property
    def version(self) -> tuple[int, str]:
        return hlc_codec.decode(self.hlc), self.origin


class PushIn(_Strict):
    node_id: str = Field(pattern=NODE_ID, description="The pushing node's id; every change's origin names a node.")
    name: str | None = Field(default=None, max_length=200, description="The machine's name, for the dashboard.")
    changes: list[ChangeWire] = Field(max_length=MAX_BATCH)


class PushOut(BaseModel):
    accepted: int
    applied: int
    unchanged: int
    conflicts: int
    # Defaults to 0: an edge from before it answers without it.
    discarded: int = Field(
        default=0,
        description="Changes of memories the edge never had whose newest version in the batch is a delete: "
        "nothing to delete, nothing stored.",
    )


class PullOut(BaseModel):
    changes: list[ChangeWire]
    cursor: str
    more: bool


class PullBody(TypedDict):
    """What an edge sends for ``PullOut`` (its changes built by ``outgoing``)."""

    changes: list[SentChange]
    cursor: str
    more: bool


@dataclass(frozen=True, slots=True)
class Incoming:
    """A change to apply, checked: what ``app.sync.apply`` works on."""

    memory_id: str
    hlc: int
    origin: str
    op: Op
    record: RecordWire
    vector: list[float] | None

    @property
    def version(self) -> tuple[int, str]:
        return self.hlc, self.origin


def incoming(change: ChangeWire, model_id: str, dims: int | None = None) -> Incoming:
    """A received change; its vector kept only when it comes from the receiver's own model."""
    vector = None
    if change.vector is not None and change.op == "upsert" and change.vector.model == model_id:
        vector = change.vector.floats()
        if vector is not None and dims is not None and len(vector) != dims:
            vector = None
    return Incoming(
        memory_id=change.memory_id.lower(),
        hlc=hlc_codec.decode(change.hlc),
        origin=change.origin,
        op=change.op,
        record=change.record,
        vector=vector,
    )


# A memory read for sending: its record, or a row with the same attribute names (``app.sync.outbox``).
SentRecord = MemoryRecord | NewMemory | Row[Any]


def outgoing(record: SentRecord, vector: SentVector | None = None) -> SentChange:
    """A memory's current version as a change (a tombstone for a deleted memory), from its record or a row of the
    same attribute names."""
    op: Op = "delete" if record.deleted_at is not None else "upsert"
    # Not validated again: the record passed the same rules when it was written here, and the receiver checks it.
    change: SentChange = {
        "change_id": change_id(record.id, record.hlc, record.origin, op),
        "memory_id": record.id,
        "hlc": hlc_codec.encode(record.hlc),
        "origin": record.origin,
        "op": op,
        "record": {
            "content": record.content,
            "scope": record.scope,
            "session": record.session,
            "agent": record.agent,
            "role": record.role,
            "visibility": "private" if record.visibility.startswith(PRIVATE_PREFIX) else "public",
            "tags": list(record.tags or []),
            "metadata": dict(record.metadata_ or {}),
            "created_at": record.created_at,
            "updated_at": record.deleted_at or record.updated_at,
        },
        "vector": vector if op == "upsert" else None,
    }
    if record.end_user is not None:
        change["record"]["end_user"] = record.end_user
    return change


# --- cursors ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a pull is: in the snapshot of every memory (``after`` an id, log from ``seq`` on next), or in the log.

    The empty cursor starts a full exchange: the snapshot, then the log from the position it was taken at."""

    seq: int
    after: str | None = None  # not None: in the snapshot, past this memory id

    def encode(self) -> str:
        return f"s{self.seq}.{self.after}" if self.after is not None else f"l{self.seq}"

    @staticmethod
    def decode(text: str | None) -> Cursor | None:
        """None for the empty cursor (start from the beginning)."""
        if not text:
            return None
        match = re.fullmatch(r"l(\d{1,19})|s(\d{1,19})\.([0-9a-f-]{0,36})", text)
        seq = None if match is None else int(match.group(1) or match.group(2))
        # The log position is a bigint: a larger one (19 digits can be) cannot be bound, let alone returned here.
        if match is None or seq is None or seq > MAX_INT64:
            raise ValidationFailed("cursor is not one this edge returned", field="cursor")
        if match.group(1) is not None:
            return Cursor(seq)
        return Cursor(seq, match.group(3))
