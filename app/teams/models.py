"""The records of a team: who has used each session, the messages between agents, and the task graph.

The database is the record of all three; Redis (or the in-process backend) only carries their live events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, ForeignKeyConstraint, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import BIG_ID, Base, utcnow


class SessionAgent(Base):
    """An agent that has used a session. It is in the registry while ``joined_at`` is set (``session_join``)."""

    __tablename__ = "session_agents"

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent: Mapped[str] = mapped_column(String(64), primary_key=True)
    # The role it last joined with; kept after it leaves, so that messages to that role are still addressable.
    role: Mapped[str | None] = mapped_column(String(64), default=None)
    capabilities: Mapped[list[str]] = mapped_column(default=list)
    client: Mapped[str | None] = mapped_column(String(64), default=None)
    joined_at: Mapped[datetime | None] = mapped_column(default=None)
    left_at: Mapped[datetime | None] = mapped_column(default=None)
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class SessionMessage(Base):
    """A message from one agent to an agent (``recipient`` = its name), a role (``role:NAME``) or everyone (``*``)."""

    __tablename__ = "session_messages"
    __table_args__ = (Index("ix_session_messages_user_session", "user_id", "session", "id"),)

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session: Mapped[str] = mapped_column(String(64))
    sender: Mapped[str] = mapped_column(String(64))
    recipient: Mapped[str] = mapped_column(String(70))
    kind: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    reply_to: Mapped[int | None] = mapped_column(BIG_ID, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class MessageRead(Base):
    """One agent has read one message: read marks are per agent."""

    __tablename__ = "session_message_reads"
    __table_args__ = (Index("ix_session_message_reads_reader", "user_id", "session", "agent"),)

    message_id: Mapped[int] = mapped_column(
        BIG_ID, ForeignKey("session_messages.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    agent: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64))
    session: Mapped[str] = mapped_column(String(64))
    read_at: Mapped[datetime] = mapped_column(default=utcnow)


class SessionTask(Base):
    """A task of a session's graph. ``status`` is stored as open, in_progress or completed; blocked and available
    are derived from the dependencies."""

    __tablename__ = "session_tasks"

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Creation order within the session (a batch keeps the order it was given in).
    position: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text)
    files: Mapped[list[str]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="open")
    assignee: Mapped[str | None] = mapped_column(String(64), default=None)
    result: Mapped[str | None] = mapped_column(Text, default=None)
    files_modified: Mapped[list[str]] = mapped_column(default=list)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None] = mapped_column(default=None)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)


class TaskDependency(Base):
    """``task_id`` can start only once ``depends_on`` is completed."""

    __tablename__ = "session_task_deps"
    __table_args__ = (
        ForeignKeyConstraint(
            ["user_id", "session", "task_id"],
            ["session_tasks.user_id", "session_tasks.session", "session_tasks.task_id"],
            ondelete="CASCADE",
        ),
        Index("ix_session_task_deps_depends_on", "user_id", "session", "depends_on"),
    )

    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    depends_on: Mapped[str] = mapped_column(String(64), primary_key=True)


class SessionArchive(Base):
    """A session its owner archived: left out of the dashboard's list of sessions (kept whole; agents may still use
    it) until it is unarchived."""

    __tablename__ = "session_archives"

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), primary_key=True)
    archived_at: Mapped[datetime] = mapped_column(default=utcnow)
