"""The change log (outbox), appended in the transaction that writes a memory, and the in-process wake-up after commit.

Log positions (``seq``) must be in commit order, or a reader that saw position 42 and stored it as its cursor would
never see a transaction that took 41 and committed after. SQLite runs one writer at a time, so its positions are in
commit order already. On PostgreSQL a transaction takes one advisory lock just before it appends and holds it until
it has committed; PostgreSQL makes a commit visible before it lets go of the transaction's locks, so whoever takes
the next position does so after the previous one is visible to every reader.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, cast

import anyio
from sqlalchemy import Table, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.db import Database, utcnow
from app.memories.models import MemoryRecord, StoredMemory
from app.sync.hlc import HybridClock
from app.sync.models import MemoryChange, SyncNode

Op = Literal["upsert", "delete"]
UPSERT: Op = "upsert"
DELETE: Op = "delete"
# pg_advisory_xact_lock key: b"engram" as a number; every writer of the log takes the same one.
_COMMIT_ORDER_LOCK = 0x656E6772616D


class ChangeFeed:
    """Wakes whoever waits for the log to move (the sync worker, long-polling pulls) once a change has committed."""

    def __init__(self) -> None:
        self.version = 0
        self._event = asyncio.Event()

    def notify(self) -> None:
        self.version += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_past(self, version: int, seconds: float) -> bool:
        """Until a notification after ``version`` (read before looking at the log), or ``seconds`` pass."""
        if self.version != version:
            return True
        event = self._event
        with anyio.move_on_after(max(0.0, seconds)):
            await event.wait()
            return True
        return False


class ChangeLog:
    """Stamps memory writes with this node's version and appends them to the log. Shared by every write path."""

    def __init__(self, node_id: str, clock: HybridClock, writer: str, feed: ChangeFeed | None = None) -> None:
        self.node_id = node_id
        self.clock = clock
        self.writer = writer
        self.feed = feed or ChangeFeed()
        self._guards: dict[str, list[Any]] = {}

    def stamp(self, records: Sequence[MemoryRecord]) -> None:
        """Give each record a new version of this node, above the one it replaces (before the row is written)."""
        for record in records:
            record.hlc = self.clock.tick(after=record.hlc or 0)
            record.origin = self.node_id

    async def append(
        self,
        session: AsyncSession,
        records: Sequence[StoredMemory],
        op: Op | Sequence[Op],
        *,
        source: str | None = None,
    ) -> None:
        """``append_within`` on an async session."""
        await session.run_sync(self.append_within, records, op, source=source)

    def append_within(
        self,
        session: Session,
        records: Sequence[StoredMemory],
        op: Op | Sequence[Op],
        *,
        source: str | None = None,
    ) -> None:
        """Append one change per record, as the last statements of the transaction (which the caller commits)."""
        ops = [op] * len(records) if isinstance(op, str) else list(op)
        session.flush()  # the memory rows first: a version conflict surfaces here (Database.session)
        hold_commit_order(session)
        now = utcnow()
        rows = [
            {
                "user_id": r.user_id,
                "memory_id": r.id,
                "op": record_op,
                "hlc": r.hlc,
                "origin": r.origin,
                "writer": self.writer,
                "source": source,
                "created_at": now,
            }
            for r, record_op in zip(records, ops, strict=True)
        ]
        if rows:  # one statement for the lot (the ORM would insert row by row to learn each new position)
            session.connection().execute(insert(cast(Table, MemoryChange.__table__)), rows)

    def committed(self) -> None:
        """Called after the transaction committed: wake the pushers and long-polls of this process."""
        self.feed.notify()

    @asynccontextmanager
    async def guard(self, memory_ids: Iterable[str]) -> AsyncIterator[None]:
        """Hold these memories for one write, from its index write to its commit, in this process.

        A write reaches the index before its commit; without this, the log follower could read the memory before
        the commit and write that older state over the new one in the index."""
        ids = sorted(set(memory_ids))  # one order for everyone: no deadlock
        wanted: list[str] = []
        acquired: list[str] = []
        try:
            for memory_id in ids:
                entry = self._guards.setdefault(memory_id, [asyncio.Lock(), 0])
                entry[1] += 1
                wanted.append(memory_id)
                await entry[0].acquire()
                acquired.append(memory_id)
            yield
        finally:
            for memory_id in reversed(acquired):
                self._guards[memory_id][0].release()
            for memory_id in wanted:
                entry = self._guards[memory_id]
                entry[1] -= 1
                if entry[1] == 0:
                    del self._guards[memory_id]


def hold_commit_order(session: Session) -> None:
    """Take the lock that orders log positions by commit (PostgreSQL; SQLite serialises writers itself)."""
    bind = session.bind
    if bind is not None and bind.dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _COMMIT_ORDER_LOCK})


async def head(session: AsyncSession) -> int:
    """The last committed log position (0 when empty)."""
    return int((await session.execute(select(func.coalesce(func.max(MemoryChange.seq), 0)))).scalar_one())


async def load_node_id(db: Database) -> str:
    """This database's node id, made on first use (instances racing to make it agree on the one that won)."""
    async with db.session() as session:
        found = (await session.execute(select(SyncNode.node_id).where(SyncNode.id == 1))).scalar_one_or_none()
    if found is not None:
        return found
    try:
        async with db.session() as session:
            session.add(SyncNode(id=1, node_id="n_" + secrets.token_hex(8)))
    except IntegrityError:
        pass
    async with db.session() as session:
        return (await session.execute(select(SyncNode.node_id).where(SyncNode.id == 1))).scalar_one()


async def open_clock(db: Database) -> HybridClock:
    """A clock above every version this database holds, so versions never go backwards across restarts."""
    async with db.session() as session:
        last = (await session.execute(select(func.coalesce(func.max(MemoryRecord.hlc), 0)))).scalar_one()
    return HybridClock(int(last))
