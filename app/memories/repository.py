"""Every SQL query about memory records. Each takes the tenant (user id) first."""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.memories.models import MemoryEvent, MemoryRecord, StoredMemory


async def get(session: AsyncSession, user_id: str, memory_id: str) -> MemoryRecord | None:
    """A live memory of this tenant; another tenant's id is indistinguishable from a missing one."""
    query = select(MemoryRecord).where(
        MemoryRecord.id == memory_id, MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None)
    )
    return (await session.execute(query)).scalar_one_or_none()


async def get_many(session: AsyncSession, user_id: str, ids: Sequence[str]) -> dict[str, MemoryRecord]:
    if not ids:
        return {}
    query = select(MemoryRecord).where(
        MemoryRecord.user_id == user_id, MemoryRecord.id.in_(ids), MemoryRecord.deleted_at.is_(None)
    )
    return {record.id: record for record in (await session.execute(query)).scalars()}


async def page(
    session: AsyncSession,
    user_id: str,
    visibilities: Sequence[str] | None,
    *,
    limit: int,
    after: tuple[datetime, str] | None,
    scope: str | None = None,
    end_user: str | None = None,
) -> Sequence[MemoryRecord]:
    """Newest first; ``after`` is the (created_at, id) of the last row of the previous page.

    ``visibilities`` None means every memory of the tenant (the owner's own view)."""
    query = select(MemoryRecord).where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))
    if visibilities is not None:
        query = query.where(MemoryRecord.visibility.in_(visibilities))
    if scope is not None:
        query = query.where(MemoryRecord.scope == scope)
    if end_user is not None:
        query = query.where(MemoryRecord.end_user == end_user)
    if after is not None:
        created_at, last_id = after
        query = query.where(
            or_(
                MemoryRecord.created_at < created_at,
                and_(MemoryRecord.created_at == created_at, MemoryRecord.id < last_id),
            )
        )
    query = query.order_by(MemoryRecord.created_at.desc(), MemoryRecord.id.desc()).limit(limit)
    return (await session.execute(query)).scalars().all()


async def previous_contents(
    session: AsyncSession, records: Sequence[StoredMemory], *, within: timedelta
) -> dict[str, str]:
    """``previous_content_query`` for many records at once (by record id; those without a neighbour are left out).

    A few queries per place instead of one per record: the ids and times of the live memories around the records
    (the one before the earliest, and those between the earliest and the latest), from which each record's
    neighbour is picked here, then the contents of the neighbours that are not among the records. The live
    ``records`` count as stored even before they are inserted (a synced batch indexes its new memories while their
    rows are being written)."""
    places: dict[tuple[str, str], list[StoredMemory]] = {}
    for record in records:
        places.setdefault((record.user_id, record.visibility), []).append(record)
    neighbour: dict[str, str] = {}
    for (user_id, visibility), group in places.items():
        lo, hi = min(r.created_at for r in group), max(r.created_at for r in group)
        live = select(MemoryRecord.id, MemoryRecord.created_at).where(
            MemoryRecord.user_id == user_id, MemoryRecord.visibility == visibility, MemoryRecord.deleted_at.is_(None)
        )
        # The memories within the group's own span, and the one just before it: reading the whole window before
        # the earliest record read every memory of the last half hour again for each synced batch.
        first = live.where(MemoryRecord.created_at >= lo - within, MemoryRecord.created_at < lo)
        first = first.order_by(MemoryRecord.created_at.desc(), MemoryRecord.id.desc()).limit(1)
        span = live.where(MemoryRecord.created_at >= lo, MemoryRecord.created_at < hi)
        span = span.order_by(MemoryRecord.created_at, MemoryRecord.id)
        stored = list((await session.execute(first)).all())
        if hi > lo:
            stored += (await session.execute(span)).all()
        known = {row.id for row in stored}
        unstored = [(r.created_at, r.id) for r in group if r.deleted_at is None and r.id not in known]
        around = sorted([(row.created_at, row.id) for row in stored] + unstored)
        times = [created_at for created_at, _ in around]
        for record in group:
            # The last one written strictly before the record (the greatest (created_at, id) below its time).
            at = bisect.bisect_left(times, record.created_at) - 1
            if at >= 0 and times[at] >= record.created_at - within:
                neighbour[record.id] = around[at][1]
    # A neighbour among ``records`` themselves (a synced batch is mostly its own neighbours) is read from there.
    contents: dict[str, str] = {r.id: r.content for r in records if r.deleted_at is None}
    wanted = sorted(set(neighbour.values()) - contents.keys())
    for start in range(0, len(wanted), 500):
        rows = await session.execute(
            select(MemoryRecord.id, MemoryRecord.content).where(MemoryRecord.id.in_(wanted[start : start + 500]))
        )
        contents.update({row.id: row.content for row in rows})
    return {rid: contents[nid] for rid, nid in neighbour.items() if nid in contents}


async def agents_in(session: AsyncSession, user_id: str, session_name: str) -> list[str]:
    """The agents that wrote a live memory in one session."""
    query = (
        select(MemoryRecord.agent)
        .where(
            MemoryRecord.user_id == user_id,
            MemoryRecord.session == session_name,
            MemoryRecord.agent.is_not(None),
            MemoryRecord.deleted_at.is_(None),
        )
        .distinct()
    )
    return sorted(agent for agent in (await session.execute(query)).scalars() if agent)


async def tags_of(session: AsyncSession, user_id: str, visibilities: Sequence[str]) -> list[list[str]]:
    query = select(MemoryRecord.tags).where(
        MemoryRecord.user_id == user_id,
        MemoryRecord.visibility.in_(visibilities),
        MemoryRecord.deleted_at.is_(None),
    )
    return [list(tags or []) for tags in (await session.execute(query)).scalars()]


async def history(
    session: AsyncSession, user_id: str, memory_id: str, *, limit: int, after: int | None = None
) -> Sequence[MemoryEvent]:
    """At most ``limit`` events of a memory, oldest first, after the event whose id is ``after``."""
    query = select(MemoryEvent).where(MemoryEvent.user_id == user_id, MemoryEvent.memory_id == memory_id)
    if after is not None:
        query = query.where(MemoryEvent.id > after)
    query = query.order_by(MemoryEvent.id).limit(limit)
    return (await session.execute(query)).scalars().all()


async def any_record(session: AsyncSession, user_id: str, memory_id: str) -> MemoryRecord | None:
    """Live or deleted: history outlives deletion."""
    query = select(MemoryRecord).where(MemoryRecord.id == memory_id, MemoryRecord.user_id == user_id)
    return (await session.execute(query)).scalar_one_or_none()


async def live_ids(session: AsyncSession) -> set[str]:
    """Every live memory id of every tenant (index repair)."""
    query = select(MemoryRecord.id).where(MemoryRecord.deleted_at.is_(None))
    return set((await session.execute(query)).scalars())


async def stream_live(session: AsyncSession, *, batch: int = 500) -> AsyncIterator[list[MemoryRecord]]:
    """All live memories in id order, a batch at a time (reindex)."""
    last = ""
    while True:
        query = (
            select(MemoryRecord)
            .where(MemoryRecord.deleted_at.is_(None), MemoryRecord.id > last)
            .order_by(MemoryRecord.id)
            .limit(batch)
        )
        rows = list((await session.execute(query)).scalars())
        if not rows:
            return
        yield rows
        last = rows[-1].id


async def by_ids(session: AsyncSession, ids: Sequence[str]) -> Sequence[MemoryRecord]:
    """Live rows by id across tenants: only for index repair, which works on ids it got from our own index."""
    query = select(MemoryRecord).where(MemoryRecord.id.in_(ids), MemoryRecord.deleted_at.is_(None))
    return (await session.execute(query)).scalars().all()


def previous_content_query(user_id: str, visibility: str, before: datetime, *, within: timedelta) -> Select[Any]:
    """The content of the live memory written last before ``before`` in one place (tenant and visibility), if it was
    written no more than ``within`` earlier: the neighbour a memory is indexed with. One row, for ``Database.first``
    (an add reads it outside any transaction): the index on (user_id, visibility, deleted_at, created_at) serves it,
    with a sort only among equal times."""
    return (
        select(MemoryRecord.content)
        .where(
            MemoryRecord.user_id == user_id,
            MemoryRecord.visibility == visibility,
            MemoryRecord.deleted_at.is_(None),
            MemoryRecord.created_at < before,
            MemoryRecord.created_at >= before - within,
        )
        .order_by(MemoryRecord.created_at.desc(), MemoryRecord.id.desc())
        .limit(1)
    )


async def existing_ids(session: AsyncSession, ids: Sequence[str]) -> dict[str, str]:
    """Which of ``ids`` any memory row has (live or deleted, of any tenant), with the tenant that holds it: ids are
    global, so an import must know an id is taken even where it cannot read it."""
    if not ids:
        return {}
    rows = await session.execute(select(MemoryRecord.id, MemoryRecord.user_id).where(MemoryRecord.id.in_(list(ids))))
    return {memory_id: user_id for memory_id, user_id in rows.all()}


async def counts_by(session: AsyncSession, user_id: str, column: str) -> dict[str | None, int]:
    """How many live memories of this tenant have each value of ``column`` (session, scope, agent)."""
    field = getattr(MemoryRecord, column)
    query = (
        select(field, func.count())
        .where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))
        .group_by(field)
    )
    return {value: int(n) for value, n in (await session.execute(query)).all()}


async def all_tags(session: AsyncSession, user_id: str) -> list[list[str]]:
    """The tag lists of every live memory of this tenant (counted by the caller: JSON differs between backends)."""
    query = select(MemoryRecord.tags).where(MemoryRecord.user_id == user_id, MemoryRecord.deleted_at.is_(None))
    return [list(tags or []) for tags in (await session.execute(query)).scalars()]


async def ids_in_session(session: AsyncSession, user_id: str, session_name: str, *, limit: int) -> list[str]:
    """Up to ``limit`` ids of the live memories written in one session (erasing a session, a batch at a time)."""
    query = (
        select(MemoryRecord.id)
        .where(
            MemoryRecord.user_id == user_id,
            MemoryRecord.session == session_name,
            MemoryRecord.deleted_at.is_(None),
        )
        .order_by(MemoryRecord.id)
        .limit(limit)
    )
    return list((await session.execute(query)).scalars())


async def counts_by_session(session: AsyncSession, user_id: str) -> dict[str, int]:
    """Live memories written in each session of this tenant (user-wide ones, without a session, left out)."""
    return {name: n for name, n in (await counts_by(session, user_id, "session")).items() if name is not None}
