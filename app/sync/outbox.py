"""Reading what to send: a node's next push batch, an edge's next pull page. Each sends memories as they are now.

A log row says that a memory changed; the change sent is the memory's current version, read from ``memories``
with its vector from the index. A later version makes an earlier row's send a repeat, which is harmless.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database
from app.errors import Conflict
from app.memories.models import MemoryRecord
from app.sync.backlog import PushPosition
from app.sync.changelog import head
from app.sync.models import MemoryChange
from app.sync.protocol import Cursor, SentChange, SentRecord, outgoing, packed_vector
from app.sync.recent import RecentChanges

if TYPE_CHECKING:  # the engine imports the model and the stores; `engram sync status` needs neither
    from app.memories.engine import MemoryEngine


class CursorAhead(Conflict):
    """The cursor names a log position this edge has never reached (its database was restored from an older copy)."""

    code = "cursor_reset"


@dataclass(frozen=True, slots=True)
class PushBatch:
    changes: list[SentChange]
    position: PushPosition
    # Nothing was left to read past ``position`` when this batch was read.
    drained: bool


@dataclass(frozen=True, slots=True)
class PullPage:
    changes: list[SentChange]
    cursor: Cursor
    more: bool
    # The log position this page brings the puller to (for "how far behind").
    reached: int


# A memory's columns, each named as its ``MemoryRecord`` attribute: batches are read as plain rows, which cost a
# fraction of loading ORM objects (nothing here writes them back).
_AS_ATTRIBUTES = [prop.columns[0].label(prop.key) for prop in MemoryRecord.__mapper__.column_attrs]


async def with_vectors(
    engine: MemoryEngine | None, records: Sequence[SentRecord], ready: Mapping[str, SentChange] | None = None
) -> list[SentChange]:
    """Changes for ``records``, each live one with its vector when the index holds it for this very content;
    ``ready``: changes already built for some of them (``RecentChanges``)."""
    ready = ready or {}
    live = [r.id for r in records if r.deleted_at is None and r.id not in ready]
    found = await engine.packed_vectors(live) if engine is not None and live else {}
    out: list[SentChange] = []
    for record in records:
        built = ready.get(record.id)
        if built is not None:
            out.append(built)
            continue
        indexed = found.get(record.id)
        vector = None
        if engine is not None and indexed is not None and indexed[0] == record.content:
            vector = packed_vector(engine.model_id, indexed[1])
        out.append(outgoing(record, vector))
    return out


async def _records(session: AsyncSession, user_id: str, ids: Sequence[str]) -> list[Row[Any]]:
    """This tenant's records (live and deleted) with these ids, in the order of ``ids``."""
    if not ids:
        return []
    query = select(*_AS_ATTRIBUTES).where(MemoryRecord.user_id == user_id, MemoryRecord.id.in_(ids))
    by_id = {r.id: r for r in (await session.execute(query)).all()}
    return [by_id[i] for i in ids if i in by_id]


async def _snapshot(session: AsyncSession, user_id: str, after: str, limit: int) -> list[Row[Any]]:
    query = (
        select(*_AS_ATTRIBUTES)
        .where(MemoryRecord.user_id == user_id, MemoryRecord.id > after)
        .order_by(MemoryRecord.id)
        .limit(limit)
    )
    return list((await session.execute(query)).all())


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


async def next_push(
    db: Database, engine: MemoryEngine | None, user_id: str, link_id: str, position: PushPosition, limit: int
) -> PushBatch:
    """The next batch a link sends: its user's memories (the snapshot) first, then the log, minus what the link
    itself brought in."""
    async with db.session() as session:
        if position.after is not None:
            rows = await _snapshot(session, user_id, position.after, limit)
            if len(rows) < limit:
                return PushBatch(await with_vectors(engine, rows), PushPosition(position.seq), drained=False)
            return PushBatch(await with_vectors(engine, rows), PushPosition(position.seq, rows[-1].id), False)
        query = (
            select(MemoryChange.seq, MemoryChange.memory_id, MemoryChange.source)
            .where(MemoryChange.user_id == user_id, MemoryChange.seq > position.seq)
            .order_by(MemoryChange.seq)
            .limit(limit)
        )
        log_rows = (await session.execute(query)).all()
        if not log_rows:
            return PushBatch([], position, drained=True)
        ids = _unique([row.memory_id for row in log_rows if row.source != link_id])
        records = await _records(session, user_id, ids)
    return PushBatch(await with_vectors(engine, records), PushPosition(log_rows[-1].seq), drained=len(log_rows) < limit)


async def pull_page(
    db: Database,
    engine: MemoryEngine | None,
    user_id: str,
    cursor: Cursor | None,
    node_id: str | None,
    limit: int,
    recent: RecentChanges | None = None,
) -> PullPage:
    """The next page of ``user_id``'s changes that did not come from ``node_id``: the snapshot of every memory
    when ``cursor`` is None, then the log in commit order. ``recent``: changes kept as sent (an edge's)."""
    async with db.session() as session:
        top = await head(session)
        if cursor is None:
            cursor = Cursor(top, after="")
        if cursor.seq > top:
            raise CursorAhead("this edge's change log is behind the cursor; start again from an empty cursor")
        if cursor.after is not None:
            rows = await _snapshot(session, user_id, cursor.after, limit)
            following = Cursor(cursor.seq, rows[-1].id) if len(rows) == limit else Cursor(cursor.seq)
            changes = await with_vectors(engine, rows, recent.take(user_id, rows) if recent else None)
            return PullPage(changes, following, more=True, reached=cursor.seq)
        query = (
            select(MemoryChange.seq, MemoryChange.memory_id, MemoryChange.origin)
            .where(MemoryChange.user_id == user_id, MemoryChange.seq > cursor.seq)
            .order_by(MemoryChange.seq)
            .limit(limit)
        )
        log_rows = (await session.execute(query)).all()
        if not log_rows:
            return PullPage([], cursor, more=False, reached=cursor.seq)
        ids = _unique([row.memory_id for row in log_rows if node_id is None or row.origin != node_id])
        records = await _records(session, user_id, ids)
    reached = log_rows[-1].seq
    changes = await with_vectors(engine, records, recent.take(user_id, records) if recent else None)
    return PullPage(changes, Cursor(reached), more=len(log_rows) == limit, reached=reached)
