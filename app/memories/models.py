from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class MemoryRecord(Base):
    """The record of a memory. The vector index is derived from these rows and can be rebuilt from them."""

    __tablename__ = "memories"
    __table_args__ = (Index("ix_memories_user_visibility", "user_id", "visibility", "deleted_at", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session: Mapped[str | None] = mapped_column(String(64), default=None)
    agent: Mapped[str | None] = mapped_column(String(64), default=None)
    scope: Mapped[str] = mapped_column(String(16))
    # "user", "s:SESSION" or "a:SESSION:AGENT": the one key every read filters on.
    visibility: Mapped[str] = mapped_column(String(140))
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)


class MemoryEvent(Base):
    """One change of a memory: the history the API shows."""

    __tablename__ = "memory_events"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    memory_id: Mapped[str] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(16))
    old_content: Mapped[str | None] = mapped_column(Text, default=None)
    new_content: Mapped[str | None] = mapped_column(Text, default=None)
    actor: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
