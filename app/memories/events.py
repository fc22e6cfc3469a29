"""The history events a write leaves, in the transaction that makes it: who did it (the actor), and what changed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.accounts.principal import Principal
from app.identity import Identity
from app.memories.models import MemoryEvent, MemoryRecord
from app.memories.schemas import MemoryPatch


def log_added(session: Session | AsyncSession, principal: Principal, records: Sequence[MemoryRecord]) -> None:
    """Record the ADD of new memory rows, in the transaction that writes them."""
    session.add_all(
        MemoryEvent(
            memory_id=r.id,
            user_id=r.user_id,
            event="ADD",
            new_content=r.content,
            actor=actor_of(principal, r.session, r.agent),
            created_at=r.created_at,
        )
        for r in records
    )


def mark_deleted(
    session: AsyncSession, principal: Principal, who: Identity, records: Sequence[MemoryRecord], now: datetime
) -> None:
    """Mark memory rows deleted and record each DELETE, in the transaction that deletes them."""
    for record in records:
        record.deleted_at = now
        session.add(
            MemoryEvent(
                memory_id=record.id,
                user_id=record.user_id,
                event="DELETE",
                old_content=record.content,
                actor=actor_of(principal, who.session, who.agent),
                created_at=now,
            )
        )


def actor_of(principal: Principal, session: str | None, agent: str | None) -> str:
    who = principal.user_id if session is None else f"{principal.user_id}/{session}/{agent or '-'}"
    return f"{who} via {principal.key_id or principal.via}"


def edits(patch: MemoryPatch) -> bool:
    """Whether a patch changes what a memory holds (content, tags, metadata), not only its reach."""
    return patch.content is not None or patch.tags is not None or patch.metadata is not None


def history_event(
    record: MemoryRecord, kind: str, actor: str, *, old_content: str | None = None, detail: str | None = None
) -> MemoryEvent:
    """A history event of ``record`` as it is now (an UPDATE's ``old_content`` is the version it replaced)."""
    return MemoryEvent(
        memory_id=record.id,
        user_id=record.user_id,
        event=kind,
        old_content=record.content if old_content is None else old_content,
        new_content=record.content,
        actor=actor,
        created_at=record.updated_at,
        detail=detail,
    )
