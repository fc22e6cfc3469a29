"""The one query the Mem0 routes add: an account's live memories, narrowed to named entities in SQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.memories.models import MemoryRecord

_COLUMNS = {"end_user": MemoryRecord.end_user, "session": MemoryRecord.session, "agent": MemoryRecord.agent}


async def live_records(
    session: AsyncSession, user_id: str, visibilities: Sequence[str], entities: Mapping[str, Sequence[str]]
) -> Sequence[MemoryRecord]:
    """The tenant's live memories under one of ``visibilities``, newest first, whose end_user, session and agent
    are among the names given."""
    query = select(MemoryRecord).where(
        MemoryRecord.user_id == user_id,
        MemoryRecord.deleted_at.is_(None),
        MemoryRecord.visibility.in_(list(visibilities)),
    )
    for field, names in entities.items():
        query = query.where(_COLUMNS[field].in_(list(names)))
    query = query.order_by(MemoryRecord.created_at.desc(), MemoryRecord.id.desc())
    return (await session.execute(query)).scalars().all()


async def ever_named(session: AsyncSession, user_id: str, field: str, name: str) -> bool:
    """Whether any memory of the tenant, live or deleted, names this end user, session or agent: an entity whose
    memories are all gone still exists for Mem0 (deleting it again is no error)."""
    query = select(MemoryRecord.id).where(MemoryRecord.user_id == user_id, _COLUMNS[field] == name).limit(1)
    return (await session.execute(query)).first() is not None
