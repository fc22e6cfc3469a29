from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255), default=None)
    plan: Mapped[str] = mapped_column(String(32), default="free")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # SQLite only: live memories (deleted_at NULL), kept by triggers on ``memories`` (migration 0056) in every
    # writing transaction, never written by the application. 0 on PostgreSQL, where the quota counts rows instead.
    memories_stored: Mapped[int] = mapped_column(default=0, server_default="0")


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    scope: Mapped[str] = mapped_column(String(16))
    # Public lookup part embedded in the key itself; the secret part is only ever stored as a keyed hash.
    lookup: Mapped[str] = mapped_column(String(16), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    # A key bound to one session and agent acts only as that agent: both set, or neither (an unbound key).
    session: Mapped[str | None] = mapped_column(String(64), default=None)
    agent: Mapped[str | None] = mapped_column(String(64), default=None)


class CredentialRevocation(Base):
    """One row per act of revocation, written in the revoking transaction: how servers in other processes (the CLI
    of an embedded install, an instance Redis could not reach) learn of it. Rows are read for seconds, then purged."""

    __tablename__ = "credential_revocations"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(64))
    revoked_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
