from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class Project(Base):
    """A folder on this machine whose documents are indexed into the session ``name`` of one user."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("user_id", "name", name="uq_projects_user_id_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(Text)
    patterns: Mapped[list[str]] = mapped_column(default=list)
    excludes: Mapped[list[str]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_indexed_at: Mapped[datetime | None] = mapped_column(default=None)


class Document(Base):
    """One indexed file of a session: what it held when indexed, and the memories (chunks) made from it.

    The chunks are memories like any other; this row is how a re-index finds exactly the chunks of one file."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("user_id", "session", "path", name="uq_documents_user_id_session_path"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    session: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(String(512))
    # "folder" (a registered project), "upload" (REST) or "agent" (MCP): a folder's reconcile removes only its own.
    origin: Mapped[str] = mapped_column(String(16))
    content_hash: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    modified_at: Mapped[datetime | None] = mapped_column(default=None)
    memory_ids: Mapped[list[str]] = mapped_column(default=list)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    # The chunking rules that cut it (app.projects.chunking.CHUNKING): a folder's reconcile re-chunks older ones.
    chunking: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    indexed_at: Mapped[datetime] = mapped_column(default=utcnow)
