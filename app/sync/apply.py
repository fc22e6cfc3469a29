"""Applying changes made elsewhere: the last writer wins per memory, a batch is one transaction, the index follows.

Versions order by (hlc, origin). A change newer than the memory's version replaces it (a delete leaves a
tombstone that carries the version, so it beats every older write); an older one loses, and when it brought
something this memory never held, the loss is recorded in the memory's history with the winner named (the newest
few per memory, see ``app.sync.history``). Of the versions of one memory in one batch only the newest can win: it
is applied, and the others lose to it. The result
depends only on the set of versions received, never on their order, so every node converges. Applied changes are
appended to the log with the version they carry (never as this node's own), which is how the edge passes a
node's change on to the others and how a node avoids sending a pulled change back.

A node's push stores nothing for a memory this server never had whose newest version in the batch is a delete
(counted as ``discarded``): there is nothing to delete, and a tombstone is no memory, so storing it let a push
write without end past the plan's quota. This keeps the result independent of order, because of how versions
travel: a sender sends a memory's current version, so over one link a memory's versions only ever arrive newer;
and a memory reaches other nodes only through the edge, their hub. A memory the edge never had was made and
deleted on one node before that node pushed it, so no one else holds any version of it, and that node sends none
older than its delete. (A node linked to several edges relays: an older version of such a memory can reach an
edge through it, but the relay sends the delete on too once it holds it, and the delete wins here then.) One order
remains: a push of the memory's older version still in flight when its sender's next push, with the delete, lands
first, as a retry after a timeout can on another instance of the edge. For that, a discarded delete's version is
kept for a while (``app.sync.discards``), and an older version of that memory loses to it as to a tombstone. Pulled
changes (a node applying its edge's) keep every tombstone, so a node that relays passes every delete on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database
from app.errors import Conflict, Forbidden, MemoryTooLarge, ValidationFailed
from app.memories.engine import IndexedMemory, MemoryEngine
from app.memories.models import MemoryRecord, NewMemory, StoredMemory
from app.memories.records import with_context
from app.quotas.service import Quotas
from app.sync import hlc as hlc_codec
from app.sync.changelog import DELETE, UPSERT, ChangeLog, Op
from app.sync.discards import discarded_lately, remember_discards
from app.sync.history import EventRow, Loss, conflict_events, event, insert_events, keep_newest_conflicts
from app.sync.protocol import Incoming
from app.text import check_text

log = logging.getLogger(__name__)

# Called inside the batch's transaction once the records are written (before the commit).
Finish = Callable[[AsyncSession], Awaitable[None]]


@dataclass
class Applied:
    applied: int = 0
    unchanged: int = 0
    conflicts: int = 0
    # Versions of memories this server never had whose newest in the batch is a delete (a push only): not stored.
    discarded: int = 0
    # The records this batch changed, as committed.
    changed: list[StoredMemory] = field(default_factory=list)


@dataclass
class _Plan:
    changed: dict[str, StoredMemory] = field(default_factory=dict)
    ops: dict[str, Op] = field(default_factory=dict)
    vectors: dict[str, list[float]] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    # Versions that lost, settled once the batch's winners are (see ``app.sync.history``).
    losses: list[Loss] = field(default_factory=list)
    # Memories this batch creates: inserted in one statement, not through the session (see ``_insert_new``).
    new: list[NewMemory] = field(default_factory=list)
    net_added: int = 0
    result: Applied = field(default_factory=Applied)
    # A node's push: deletes of memories never held here are discarded (see the module docstring).
    pushed: bool = False
    discarded: set[str] = field(default_factory=set)
    # The versions of such deletes: kept a while (``DISCARDS_KEPT``); ``remembered`` are those kept before.
    discards: dict[str, tuple[int, str]] = field(default_factory=dict)
    remembered: dict[str, tuple[int, str]] = field(default_factory=dict)


class Applier:
    """Applies batches of changes for one tenant. ``engine`` None: the database only (another process's index
    follows the log, see ``app.sync.follower``)."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine | None,
        changes: ChangeLog,
        *,
        max_memory_chars: int,
        max_clock_skew_seconds: float,
        quotas: Quotas | None = None,
        max_conflicts_per_memory: int = 20,
    ) -> None:
        self.db = db
        self.engine = engine
        self.changes = changes
        self.max_memory_chars = max_memory_chars
        self.max_skew_ms = int(max_clock_skew_seconds * 1000)
        self.quotas = quotas
        self.max_conflicts = max_conflicts_per_memory

    def check(self, batch: Sequence[Incoming]) -> None:
        """The limits a local write has, and no version from a clock far ahead of ours."""
        horizon = hlc_codec.wall_ms() + self.max_skew_ms
        for change in batch:
            content = change.record.content
            check_text(content, "content")
            if len(content) > self.max_memory_chars:
                raise MemoryTooLarge(
                    f"memory {change.memory_id} is {len(content)} characters; the limit is {self.max_memory_chars}"
                )
            ahead = hlc_codec.physical_ms(change.hlc) - horizon
            if ahead > 0:
                raise ValidationFailed(
                    f"memory {change.memory_id}: its version is {(ahead + self.max_skew_ms) / 1000:.0f} s ahead of "
                    "this clock; fix the clock of the machine that wrote it"
                )

    async def apply(
        self,
        user_id: str,
        batch: Sequence[Incoming],
        *,
        source: str | None = None,
        pushed: bool = False,
        finish: Finish | None = None,
    ) -> Applied:
        """Apply ``batch`` to ``user_id``'s memories, all or nothing; ``source`` names the link it came through.
        ``pushed``: a node pushed it here, so the plan's quota applies and unknown memories' deletes are discarded."""
        self.check(batch)
        async with self.changes.guard(c.memory_id for c in batch):
            return await self._apply(user_id, batch, source=source, pushed=pushed, finish=finish)

    async def _apply(
        self,
        user_id: str,
        batch: Sequence[Incoming],
        *,
        source: str | None,
        pushed: bool,
        finish: Finish | None,
    ) -> Applied:
        plan = _Plan(pushed=pushed)
        before: dict[str, IndexedMemory | None] = {}
        index_touched = False
        try:
            async with self.db.session() as session:
                ids = sorted({c.memory_id for c in batch})
                rows = await _rows(session, ids)
                for row in rows.values():
                    if row.user_id != user_id:
                        raise Forbidden(f"memory {row.id} cannot be written with this account's credentials")
                if pushed:
                    plan.remembered = await discarded_lately(session, user_id, [i for i in ids if i not in rows])
                held = await with_context(session, [r for r in rows.values() if r.deleted_at is None])
                before = {mid: None for mid in rows} | {m.id: m for m in held}
                # Nothing reaches the database before the quota is reserved: it counts what is stored already.
                with session.no_autoflush:
                    for change in _newest_first(batch):
                        self._one(user_id, rows, change, plan)
                    losses = await conflict_events(session, user_id, plan.losses, plan.events, self.max_conflicts)
                    plan.events += losses
                    conflicted = {e.memory_id for e in losses}
                    if pushed and self.quotas is not None and plan.net_added > 0:
                        await self.quotas.reserve_memories(session, user_id, plan.net_added)
                if plan.changed:
                    live = await with_context(session, [r for r in plan.changed.values() if r.deleted_at is None])
                    index_touched = True
                    # The index is written on a thread while the rows go to the database (each took about half of
                    # a batch); the log comes after both, because its lock orders every writer's commits.
                    indexing = asyncio.ensure_future(self._index(live, plan, before))
                    # When the rows fail too, theirs is the error raised; the index's is not logged as unretrieved.
                    indexing.add_done_callback(lambda task: task.cancelled() or task.exception())
                    try:
                        await _insert_new(session, plan.new)
                        await session.flush()
                        await insert_events(session, plan.events)
                        await keep_newest_conflicts(session, user_id, conflicted, self.max_conflicts)
                    except BaseException:
                        await asyncio.wait([indexing])  # its thread cannot be stopped: _restore runs after it
                        raise
                    await indexing
                    records = list(plan.changed.values())
                    await self.changes.append(session, records, [plan.ops[r.id] for r in records], source=source)
                elif plan.events:
                    await insert_events(session, plan.events)
                    await keep_newest_conflicts(session, user_id, conflicted, self.max_conflicts)
                if plan.discards:
                    await remember_discards(session, user_id, plan.discards)
                if finish is not None:
                    await finish(session)
        except IntegrityError as exc:
            # Another transaction created one of these memories first: the batch is retried against it.
            await self._restore(before, plan, index_touched)
            raise Conflict("a memory in this batch was created meanwhile; retry") from exc
        except BaseException:
            await self._restore(before, plan, index_touched)
            raise
        if batch:
            self.changes.clock.observe(max(c.hlc for c in batch))
        if plan.changed:
            self.changes.committed()
        plan.result.changed = list(plan.changed.values())
        return plan.result

    def _one(self, user_id: str, rows: dict[str, StoredMemory], change: Incoming, plan: _Plan) -> None:
        record = rows.get(change.memory_id)
        wire = change.record
        actor = f"{user_id} via sync from {change.origin}"
        version, remembered = (change.hlc, change.origin), plan.remembered.get(change.memory_id, (-1, ""))
        if (
            record is None
            and plan.pushed
            and (change.op == DELETE or change.memory_id in plan.discarded or version < remembered)
        ):
            # Its newest version in the batch (seen first) is a delete: this one or an older one that lost to it;
            # or it is older than a delete discarded lately (a push that was still in flight when that one landed).
            if change.op == DELETE and change.memory_id not in plan.discarded:
                plan.discards[change.memory_id] = max(version, remembered)
            plan.discarded.add(change.memory_id)
            plan.result.discarded += 1
            return
        if record is None:
            record = NewMemory(
                id=change.memory_id,
                user_id=user_id,
                session=wire.session,
                agent=wire.agent,
                end_user=wire.end_user,
                scope=wire.scope,
                visibility=wire.key(user_id),
                role=wire.role,
                content=wire.content,
                tags=list(wire.tags),
                metadata_=dict(wire.metadata),
                created_at=wire.created_at,
                updated_at=wire.updated_at,
                deleted_at=wire.updated_at if change.op == DELETE else None,
                hlc=change.hlc,
                origin=change.origin,
            )
            plan.new.append(record)
            rows[change.memory_id] = record
            kind = "DELETE" if change.op == DELETE else "ADD"
            content_field = "old_content" if change.op == DELETE else "new_content"
            plan.events.append(event(record, kind, actor, **{content_field: wire.content}))
            plan.net_added += change.op == UPSERT
            self._changed(plan, record, change)
            return
        current = (record.hlc, record.origin)
        if change.version == current:
            plan.result.unchanged += 1
            return
        if change.version < current:
            plan.result.conflicts += 1
            plan.losses.append(Loss(record, change))
            return
        was_live = record.deleted_at is None
        if change.op == DELETE:
            if was_live:
                plan.events.append(event(record, "DELETE", actor, old_content=record.content))
                plan.net_added -= 1
        elif was_live:
            update = event(record, "UPDATE", actor, old_content=record.content, new_content=wire.content)
            plan.events.append(update)
        else:
            plan.events.append(event(record, "ADD", actor, new_content=wire.content))
            plan.net_added += 1
        # The whole record comes from the winning version (a tombstone's too), so the state is the same everywhere.
        record.session = wire.session
        record.agent = wire.agent
        record.end_user = wire.end_user
        record.scope = wire.scope
        record.visibility = wire.key(user_id)
        record.role = wire.role
        record.content = wire.content
        record.tags = list(wire.tags)
        record.metadata_ = dict(wire.metadata)
        record.created_at = wire.created_at
        record.updated_at = wire.updated_at
        record.deleted_at = wire.updated_at if change.op == DELETE else None
        record.hlc = change.hlc
        record.origin = change.origin
        self._changed(plan, record, change)

    @staticmethod
    def _changed(plan: _Plan, record: StoredMemory, change: Incoming) -> None:
        plan.changed[record.id] = record
        plan.ops[record.id] = change.op
        plan.result.applied += 1
        if change.op == UPSERT and change.vector is not None:
            plan.vectors[record.id] = change.vector
        else:
            plan.vectors.pop(record.id, None)

    async def _index(self, live: list[IndexedMemory], plan: _Plan, before: dict[str, IndexedMemory | None]) -> None:
        if self.engine is None:
            return
        gone = [mid for mid, r in plan.changed.items() if r.deleted_at is not None and before.get(mid) is not None]
        if live:
            await self.engine.upsert(live, vectors=plan.vectors)
        if gone:
            await self.engine.purge(gone)

    async def _restore(self, before: dict[str, IndexedMemory | None], plan: _Plan, touched: bool) -> None:
        """Put the index back as the database still has it, after a batch that did not commit."""
        if self.engine is None or not touched:
            return
        back = [state for mid in plan.changed if (state := before.get(mid)) is not None]
        absent = [mid for mid in plan.changed if before.get(mid) is None]
        try:
            if back:
                await self.engine.upsert(back)
            if absent:
                await self.engine.purge(absent)
        except Exception:  # start-up repair removes what this could not
            log.warning("could not restore the index after a failed sync batch", exc_info=True)


def _newest_first(batch: Sequence[Incoming]) -> list[Incoming]:
    """Each memory's newest version in the batch (in version order), then the others. Only the newest can win, so
    the others are settled against what it leaves (they lose, or repeat it): a batch carrying many versions of one
    memory writes one change of it, not one event with the whole text per version in between."""
    ordered = sorted(batch, key=lambda c: c.version)
    newest = {c.memory_id: c for c in ordered}
    return [c for c in ordered if newest[c.memory_id] is c] + [c for c in ordered if newest[c.memory_id] is not c]


async def _rows(session: AsyncSession, ids: Sequence[str]) -> dict[str, StoredMemory]:
    """Every record with one of ``ids``, whoever owns it: the caller refuses a batch that touches another tenant's."""
    if not ids:
        return {}
    query = select(MemoryRecord).where(MemoryRecord.id.in_(ids))
    return {r.id: r for r in (await session.execute(query)).scalars()}


_RECORD_COLUMNS = [(prop.key, prop.columns[0].name) for prop in MemoryRecord.__mapper__.column_attrs]


async def _insert_new(session: AsyncSession, records: Sequence[NewMemory]) -> None:
    """Insert new memories as they stand after the whole batch, in one statement: the session's unit of work
    spent more on bookkeeping per object than the insert itself. A memory another transaction created meanwhile
    fails on its key as a flush would (``IntegrityError``, the batch is retried)."""
    if records:
        rows = [{column: getattr(r, key) for key, column in _RECORD_COLUMNS} for r in records]
        await (await session.connection()).execute(insert(cast(Table, MemoryRecord.__table__)), rows)
