"""The pushed deletes an edge discards (memories it never had), remembered for a while by their version.

A push stores nothing for a memory the edge never had whose newest version is a delete (``app.sync.apply``). An
older version of that memory can still arrive after it: a push that was slow on one instance of the edge while its
sender, having timed out, retried on another instance and sent the delete. Against the remembered version it loses,
as it would to a stored tombstone, instead of bringing the memory back. Only for a while: a sender gives up on a
request long before ``DISCARDS_KEPT``, so no attempt of it is still in flight by then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from sqlalchemy import delete, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.sync.models import DiscardedDelete

DISCARDS_KEPT = timedelta(minutes=10)

Version = tuple[int, str]  # (hlc, origin), ordered as the last writer wins


async def discarded_lately(session: AsyncSession, user_id: str, memory_ids: Sequence[str]) -> dict[str, Version]:
    """The versions of the deletes of these memories that pushes to ``user_id`` discarded within DISCARDS_KEPT."""
    if not memory_ids:
        return {}
    query = select(DiscardedDelete.memory_id, DiscardedDelete.hlc, DiscardedDelete.origin).where(
        DiscardedDelete.user_id == user_id,
        DiscardedDelete.memory_id.in_(memory_ids),
        DiscardedDelete.discarded_at >= utcnow() - DISCARDS_KEPT,
    )
    return {memory_id: (hlc, origin) for memory_id, hlc, origin in (await session.execute(query)).all()}


async def remember_discards(session: AsyncSession, user_id: str, versions: Mapping[str, Version]) -> None:
    """Keep these versions (in the push's transaction), and forget the user's that are past DISCARDS_KEPT: what a
    user's pushes leave here is bounded by what they can push in that time."""
    now = utcnow()
    await session.execute(
        delete(DiscardedDelete).where(
            DiscardedDelete.user_id == user_id,
            or_(DiscardedDelete.memory_id.in_(list(versions)), DiscardedDelete.discarded_at < now - DISCARDS_KEPT),
        )
    )
    rows = [
        {"user_id": user_id, "memory_id": memory_id, "hlc": hlc, "origin": origin, "discarded_at": now}
        for memory_id, (hlc, origin) in versions.items()
    ]
    await session.execute(insert(DiscardedDelete), rows)
