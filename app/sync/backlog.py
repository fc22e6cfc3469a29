"""What a link still has to push: where its push is, how many memories lie past that, and since when.

Read by ``engram sync status`` as well as by the worker, so it imports neither the sync protocol nor the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.memories.models import MemoryRecord
from app.sync.models import MemoryChange


@dataclass(frozen=True, slots=True)
class PushPosition:
    """Where a link's push is: in the snapshot (past memory id ``after``), then the log past ``seq``."""

    seq: int
    after: str | None = None


async def pending(session: AsyncSession, user_id: str, link_id: str, position: PushPosition) -> int:
    """How many memories a link still has to send (each once, however many times it changed)."""
    logged = select(MemoryChange.memory_id).where(*_unsent(user_id, link_id, position.seq))
    if position.after is not None:
        snapshot = select(MemoryRecord.id).where(MemoryRecord.user_id == user_id, MemoryRecord.id > position.after)
        logged = logged.union(snapshot)  # type: ignore[assignment]
    else:
        logged = logged.distinct()
    count = await session.execute(select(func.count()).select_from(logged.subquery()))
    return int(count.scalar_one())


async def oldest_pending_at(session: AsyncSession, user_id: str, link_id: str, seq: int) -> datetime | None:
    """When the oldest change not yet sent was written (None when the log is sent)."""
    query = select(func.min(MemoryChange.created_at)).where(*_unsent(user_id, link_id, seq))
    oldest: datetime | None = (await session.execute(query)).scalar_one()
    return oldest


def _unsent(user_id: str, link_id: str, seq: int) -> tuple[ColumnElement[bool], ...]:
    """The user's changes past ``seq`` that the link still has to send: all but those it brought in itself."""
    return (
        MemoryChange.user_id == user_id,
        MemoryChange.seq > seq,
        or_(MemoryChange.source.is_(None), MemoryChange.source != link_id),
    )
