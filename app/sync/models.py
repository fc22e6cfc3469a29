"""Edge sync state: this database's node identity, the change log, the node's links and the edge's peers."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import BIG_ID, Base, utcnow


class SyncNode(Base):
    """The one row naming this node (every instance sharing the database is the same node)."""

    __tablename__ = "sync_node"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    node_id: Mapped[str] = mapped_column(String(40), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class MemoryChange(Base):
    """The change log (the outbox): one row per committed change of a memory, numbered in commit order.

    Written in the transaction that changes the memory. It names the memory and the version written; the record
    itself is read from ``memories`` when the change is sent, so the log stays small.
    """

    __tablename__ = "memory_changes"
    __table_args__ = (Index("ix_memory_changes_user_seq", "user_id", "seq"), {"sqlite_autoincrement": True})

    seq: Mapped[int] = mapped_column(BIG_ID, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    memory_id: Mapped[str] = mapped_column(String(36))
    op: Mapped[str] = mapped_column(String(8))
    hlc: Mapped[int] = mapped_column(BigInteger)
    origin: Mapped[str] = mapped_column(String(40))
    # The index (instance) that wrote the row: the others apply it to their own embedded index.
    writer: Mapped[str] = mapped_column(String(40))
    # The link a pulled change came through, so it is not pushed back there; None for local writes.
    source: Mapped[str | None] = mapped_column(String(32), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SyncLink(Base):
    """A node's link of one local user to a user on an edge, with its credentials and its positions."""

    __tablename__ = "sync_links"
    __table_args__ = (UniqueConstraint("edge_url", "local_user_id", name="uq_sync_links_edge_user"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    edge_url: Mapped[str] = mapped_column(String(512))
    local_user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    edge_user_id: Mapped[str] = mapped_column(String(64))
    edge_node_id: Mapped[str] = mapped_column(String(40), default="")
    # "device_code" (a person approved it) or "client_credentials" (a machine client).
    grant_type: Mapped[str] = mapped_column(String(32))
    client_id: Mapped[str] = mapped_column(String(512))
    client_secret: Mapped[str | None] = mapped_column(Text, default=None)
    access_token: Mapped[str | None] = mapped_column(Text, default=None)
    access_expires_at: Mapped[datetime | None] = mapped_column(default=None)
    refresh_token: Mapped[str | None] = mapped_column(Text, default=None)
    # Another process refreshing the tokens holds this until then (a rotated refresh token must not be used twice).
    refreshing_until: Mapped[datetime | None] = mapped_column(default=None)
    # Push: while push_after is not None, the snapshot of every memory (by id, after push_after) is being sent;
    # then the log from push_horizon on. push_seq is the last log position the edge acknowledged.
    push_after: Mapped[str | None] = mapped_column(String(36), default="")
    push_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    pull_cursor: Mapped[str] = mapped_column(String(200), default="")
    push_state: Mapped[str] = mapped_column(String(16), default="ok")
    push_error: Mapped[str | None] = mapped_column(Text, default=None)
    pull_state: Mapped[str] = mapped_column(String(16), default="ok")
    pull_error: Mapped[str | None] = mapped_column(Text, default=None)
    last_push_at: Mapped[datetime | None] = mapped_column(default=None)
    last_pull_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Bumped when the credentials change (a new link, a refresh by another process): runners reload then.
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class SyncPeer(Base):
    """On the edge: a machine that syncs one user's memories (a node id seen with that user's sync token)."""

    __tablename__ = "sync_peers"
    __table_args__ = (UniqueConstraint("user_id", "node_id", name="uq_sync_peers_user_node"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    node_id: Mapped[str] = mapped_column(String(40))
    name: Mapped[str] = mapped_column(String(200))
    # The grant (token family) and the OAuth client it last came with: cutting the machine off revokes them.
    family_id: Mapped[str] = mapped_column(String(40), default="")
    client_id: Mapped[str] = mapped_column(String(512), default="")
    # The log position its pulls have reached: how far behind it is.
    pulled_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    cut_off_at: Mapped[datetime | None] = mapped_column(default=None)


class DiscardedDelete(Base):
    """A pushed delete of a memory this edge never had: no memory is stored for it (``app.sync.apply``), but its
    version is kept for a while, so that an older version of that memory still in flight (a push retried on another
    instance while the first attempt was slow) loses to it instead of bringing the memory back."""

    __tablename__ = "sync_discarded_deletes"
    __table_args__ = (Index("ix_sync_discarded_deletes_user_time", "user_id", "discarded_at"),)

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    memory_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    hlc: Mapped[int] = mapped_column(BigInteger)
    origin: Mapped[str] = mapped_column(String(40))
    discarded_at: Mapped[datetime] = mapped_column(default=utcnow)
