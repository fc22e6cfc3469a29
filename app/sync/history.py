"""The history a synced batch writes: its events as plain rows, and its losing versions, at most N kept per memory.

A losing version is kept as a CONFLICT event naming the winner, unless the memory already held what it brought or
the same loss is recorded already. Deciding that costs a few statements per batch, whatever its size, each sending
back only what matched (reading each memory's whole history once per losing version was quadratic: a push of 1,000
losers of one memory took minutes). Only the newest N of a memory's CONFLICT events are kept, the older deleted in
the batch's transaction, so a push cannot grow a memory's history without bound by losing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.memories.models import MemoryEvent, StoredMemory
from app.sync import hlc as hlc_codec
from app.sync.changelog import UPSERT
from app.sync.protocol import Incoming

CONFLICT = "CONFLICT"


@dataclass(slots=True)
class EventRow:
    """A history event to insert: a plain row, because building an ORM object per event was a tenth of applying."""

    memory_id: str
    user_id: str
    event: str
    actor: str
    created_at: datetime
    old_content: str | None = None
    new_content: str | None = None


@dataclass(slots=True)
class Loss:
    """A version that lost to ``record`` as the batch leaves it (a memory's winner is settled before its losers)."""

    record: StoredMemory
    change: Incoming


def event(record: StoredMemory, kind: str, actor: str, **contents: str | None) -> EventRow:
    return EventRow(
        memory_id=record.id,
        user_id=record.user_id,
        event=kind,
        actor=actor[:200],
        created_at=utcnow(),
        **contents,
    )


async def insert_events(session: AsyncSession, events: Sequence[EventRow]) -> None:
    """In one statement (the ORM would insert them one by one to learn their ids, which nothing here needs)."""
    if events:
        columns = ("memory_id", "user_id", "event", "old_content", "new_content", "actor", "created_at")
        table = cast(Table, MemoryEvent.__table__)
        await (await session.connection()).execute(insert(table), [{c: getattr(e, c) for c in columns} for e in events])


async def conflict_events(
    session: AsyncSession, user_id: str, losses: Sequence[Loss], planned: Sequence[EventRow], keep: int
) -> list[EventRow]:
    """The CONFLICT events to add for ``losses``, besides the batch's ``planned`` events: for each memory, the
    newest ``keep`` (by version) of those whose loss is not recorded yet and that brought something new."""
    if not losses or keep <= 0:
        return []
    named = [(loss, _actor(loss)) for loss in sorted(losses, key=lambda loss: loss.change.version)]
    ids = sorted({loss.record.id for loss in losses})
    recorded = await _recorded(session, user_id, ids, {actor for _, actor in named})
    texts = {loss.change.record.content for loss in losses if loss.change.op == UPSERT}
    held = await _held(session, user_id, ids, texts)
    held |= {(e.memory_id, text) for e in planned for text in (e.old_content, e.new_content) if text is not None}
    added: dict[str, list[EventRow]] = {}
    for loss, actor in named:
        record = loss.record
        if (record.id, actor) in recorded:
            continue
        recorded.add((record.id, actor))
        lost = loss.change.record.content if loss.change.op == UPSERT else None
        if lost is not None and (lost == record.content or (record.id, lost) in held):
            continue
        winner = None if record.deleted_at is not None else record.content
        held |= {(record.id, text) for text in (lost, winner) if text is not None}
        added.setdefault(record.id, []).append(event(record, CONFLICT, actor, old_content=lost, new_content=winner))
    return [row for rows in added.values() for row in rows[-keep:]]


async def keep_newest_conflicts(session: AsyncSession, user_id: str, memory_ids: Collection[str], keep: int) -> None:
    """Delete all but the newest ``keep`` CONFLICT events of each of these memories (after the batch's insert)."""
    if not memory_ids:
        return
    rank = func.row_number().over(partition_by=MemoryEvent.memory_id, order_by=MemoryEvent.id.desc())
    ranked = (
        select(MemoryEvent.id, rank.label("rank"))
        .where(MemoryEvent.user_id == user_id, MemoryEvent.memory_id.in_(sorted(memory_ids)))
        .where(MemoryEvent.event == CONFLICT)
        .subquery()
    )
    table = cast(Table, MemoryEvent.__table__)
    beyond = select(ranked.c.id).where(ranked.c.rank > keep)
    await (await session.connection()).execute(delete(table).where(table.c.id.in_(beyond)))


def _actor(loss: Loss) -> str:
    change, record = loss.change, loss.record
    return (
        f"sync: {change.op} {hlc_codec.encode(change.hlc)} from {change.origin} lost to "
        f"{hlc_codec.encode(record.hlc)} from {record.origin}"
    )[:200]


async def _recorded(
    session: AsyncSession, user_id: str, memory_ids: Sequence[str], actors: Collection[str]
) -> set[tuple[str, str]]:
    """(memory id, actor) of the CONFLICT events among ``actors`` these memories have already."""
    query = select(MemoryEvent.memory_id, MemoryEvent.actor).where(
        MemoryEvent.user_id == user_id,
        MemoryEvent.memory_id.in_(memory_ids),
        MemoryEvent.event == CONFLICT,
        MemoryEvent.actor.in_(sorted(actors)),
    )
    return {(row.memory_id, row.actor) for row in await session.execute(query)}


async def _held(
    session: AsyncSession, user_id: str, memory_ids: Sequence[str], texts: Collection[str]
) -> set[tuple[str, str]]:
    """(memory id, text) for each of ``texts`` that one of these memories' events holds, as old or new content:
    compared by the database, which sends back the matches only, never the history."""
    if not texts:
        return set()
    found: set[tuple[str, str]] = set()
    for column in (MemoryEvent.old_content, MemoryEvent.new_content):
        query = (
            select(MemoryEvent.memory_id, column)
            .where(MemoryEvent.user_id == user_id, MemoryEvent.memory_id.in_(memory_ids), column.in_(sorted(texts)))
            .distinct()
        )
        found |= {(row[0], row[1]) for row in await session.execute(query) if row[1] is not None}
    return found
