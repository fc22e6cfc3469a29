from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import BIG_ID, Base, utcnow


class MemoryRecord(Base):
    """The record of a memory. The vector index is derived from these rows and can be rebuilt from them.

    On SQLite, triggers on this table keep ``users.memories_stored`` (migration 0056): a migration that recreates
    the table (Alembic's batch mode copies it) must create them again."""

    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_user_visibility", "user_id", "visibility", "deleted_at", "created_at"),
        Index("ix_memories_user_end_user", "user_id", "end_user"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session: Mapped[str | None] = mapped_column(String(64), default=None)
    agent: Mapped[str | None] = mapped_column(String(64), default=None)
    # The end user of the account's app this memory is about (Mem0's user_id); None for the account's own memories.
    # A filter, not a reader: who may read a memory is still decided by ``visibility`` alone.
    end_user: Mapped[str | None] = mapped_column(String(128), default=None)
    scope: Mapped[str] = mapped_column(String(16))
    # The one key every read filters on: "user", "s:SESSION", "a:SESSION:AGENT", "r:ROLE" or, for a private memory
    # whatever its scope, "p:SESSION:AGENT" (see app.memories.scopes).
    visibility: Mapped[str] = mapped_column(String(140))
    # The role a memory of scope "role" was written for (also kept while it is private).
    role: Mapped[str | None] = mapped_column(String(64), default=None)
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)
    # The version edge sync orders by (app.sync): a hybrid logical clock and the node that wrote it. Every write
    # raises it, and the UPDATE is conditional on the version read (version_id_col), so two writers racing on one
    # memory cannot both succeed with the same version.
    hlc: Mapped[int] = mapped_column(BigInteger, default=0)
    origin: Mapped[str] = mapped_column(String(40), default="")

    __mapper_args__ = {"version_id_col": hlc, "version_id_generator": False}


@dataclass(slots=True)
class NewMemory:
    """A memory about to be inserted as a plain row (a synced batch's new memories): ``MemoryRecord``'s attributes
    without the ORM's per-object bookkeeping, which cost more than the insert itself."""

    id: str
    user_id: str
    session: str | None
    agent: str | None
    scope: str
    visibility: str
    role: str | None
    content: str
    tags: list[str]
    metadata_: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    hlc: int
    origin: str
    end_user: str | None = None


# What readers of a memory's fields take: a stored record, or a new one about to be inserted.
StoredMemory = MemoryRecord | NewMemory


class MemoryEvent(Base):
    """One change of a memory: the history the API shows."""

    __tablename__ = "memory_events"

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True, autoincrement=True)
    memory_id: Mapped[str] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(16))
    old_content: Mapped[str | None] = mapped_column(Text, default=None)
    new_content: Mapped[str | None] = mapped_column(Text, default=None)
    actor: Mapped[str | None] = mapped_column(String(200), default=None)
    # What a PROMOTE changed, e.g. "scope: session -> user".
    detail: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
