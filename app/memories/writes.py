"""Writes that store new memories for MemoryService: add, replace and import, each all or none."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.accounts.principal import Principal
from app.db import utcnow
from app.errors import Conflict, PayloadTooLarge, ValidationFailed
from app.identity import Identity
from app.memories import repository
from app.memories.events import log_added, mark_deleted
from app.memories.models import MemoryRecord
from app.memories.records import CONTEXT_WINDOW, to_indexed, to_out, with_context
from app.memories.schemas import CreatedMemory, MemoryIn, MemoryOut
from app.memories.scopes import Scope, can_read, default_scope, visibility_key
from app.memories.service_base import MemoryServiceBase, log, resolve_identity


def _new_record(
    principal: Principal,
    memory_id: str,
    content: str,
    item: MemoryIn,
    writer: Identity,
    scope: Scope,
    visibility: str,
    role: str | None,
    now: datetime,
) -> MemoryRecord:
    """The database row of a memory just indexed under ``memory_id`` (``content`` as the index stored it)."""
    return MemoryRecord(
        id=memory_id,
        user_id=principal.user_id,
        session=writer.session,
        agent=writer.agent,
        end_user=item.end_user,
        scope=scope,
        visibility=visibility,
        role=role,
        content=content,
        tags=list(item.tags),
        metadata_=dict(item.metadata),
        created_at=now,
        updated_at=now,
    )


class MemoryWrites(MemoryServiceBase):
    """Index first, because mem0 chooses the memory ids; what a failed commit leaves in the index is taken out."""

    async def _plan(
        self, principal: Principal, identity: Identity | None, items: Sequence[MemoryIn]
    ) -> list[tuple[MemoryIn, Identity, Scope, str, str | None]]:
        """Check each new memory and decide who writes it, its scope, its visibility key and its role."""
        plans: list[tuple[MemoryIn, Identity, Scope, str, str | None]] = []
        roles: dict[Identity, str | None] = {}
        for item in items:
            self._check_fields(item.content, item.tags, item.metadata)
            who = resolve_identity(principal, identity, item.session, item.agent)
            scope = item.scope or default_scope(who)
            role = None
            if scope == "role":
                if who not in roles:
                    roles[who] = await self._role(who)
                role = roles[who]
            key = visibility_key(scope, who, role=role, visibility=item.visibility)
            plans.append((item, who, scope, key, role))
        return plans

    async def add(
        self, principal: Principal, identity: Identity | None, items: Sequence[MemoryIn]
    ) -> list[CreatedMemory]:
        """Store memories (all or none) and return what was stored; infer may turn one text into several facts."""
        principal.require_write()
        if len(items) > self.limits.max_batch_size:
            raise PayloadTooLarge(f"a batch holds at most {self.limits.max_batch_size} memories")
        plans = await self._plan(principal, identity, items)
        for item in items:
            if item.infer and not self.engine.infer_available:
                raise ValidationFailed("infer needs an LLM; this server has none configured (ENGRAM_LLM_BASE_URL)")

        if self.quotas is not None:
            await self.quotas.check_memories(principal.user_id, len(plans))
        indexed: list[str] = []
        records: list[MemoryRecord] = []
        previous: dict[str, str | None] = {}
        try:
            for item, who, scope, visibility, role in plans:
                now = utcnow()
                if visibility not in previous:
                    neighbour = await self.db.first(
                        repository.previous_content_query(principal.user_id, visibility, now, within=CONTEXT_WINDOW)
                    )
                    previous[visibility] = neighbour[0] if neighbour is not None else None
                context = previous[visibility] or ""
                previous[visibility] = item.content
                outcomes = await self.engine.add(
                    user_id=principal.user_id,
                    content=item.content,
                    visibility=visibility,
                    scope=scope,
                    session=who.session,
                    agent=who.agent,
                    tags=list(item.tags),
                    metadata=dict(item.metadata),
                    infer=item.infer,
                    created_at=now.isoformat(),
                    context=context,
                    end_user=item.end_user,
                )
                for outcome in outcomes:
                    indexed.append(outcome.id)
                    records.append(
                        _new_record(principal, outcome.id, outcome.content, item, who, scope, visibility, role, now)
                    )

            await self.db.write(await self._storing(principal, records))
        except BaseException:
            await self._unindex(principal.user_id, indexed)
            raise
        self._committed()
        if self.metrics is not None:
            self.metrics.memories_added.inc(len(records))
        return [CreatedMemory(**to_out(r).model_dump(), event="ADD") for r in records]

    async def _storing(self, principal: Principal, records: Sequence[MemoryRecord]) -> Callable[[Session], None]:
        """The write that stores new memory rows: within the plan's quota, stamped, with their ADD events and their
        change-log entries. It runs on a worker thread (``Database.write``): what needs the event loop (the plan) is
        read here first."""
        plan = await self.quotas.plan_for(principal.user_id) if self.quotas is not None else None

        def store(session: Session) -> None:
            if self.quotas is not None and plan is not None:
                self.quotas.reserve_memories_within(session, plan, principal.user_id, len(records))
            self._stamp(records)
            session.add_all(records)
            session.flush()
            log_added(session, principal, records)
            self._log_within(session, records, "upsert")

        return store

    async def _unindex(self, user_id: str, ids: Sequence[str]) -> None:
        for memory_id in ids:
            try:
                await self.engine.delete(user_id=user_id, memory_id=memory_id)
            except Exception:  # the index is derived; repair removes what this could not
                log.warning("could not remove unacknowledged memory %s from the index", memory_id, exc_info=True)

    async def replace(
        self,
        principal: Principal,
        identity: Identity | None,
        remove: Sequence[str],
        items: Sequence[MemoryIn],
        *,
        before: Callable[[AsyncSession], Awaitable[None]] | None = None,
        after: Callable[[AsyncSession, builtins.list[MemoryOut]], Awaitable[None]] | None = None,
    ) -> builtins.list[MemoryOut]:
        """Delete the memories ``remove`` names and add ``items`` as one write: all of it happens or none of it.

        Ids in ``remove`` that no longer exist are passed over. ``before`` runs first in the database transaction,
        before the index is touched (take locks, re-check what the caller planned on); ``after`` runs last in it
        with the new memories (record what refers to them). The new memories are embedded in batches."""
        async with self._guard(remove):
            return await self._replace(principal, identity, remove, items, before, after)

    async def _replace(
        self,
        principal: Principal,
        identity: Identity | None,
        remove: Sequence[str],
        items: Sequence[MemoryIn],
        before: Callable[[AsyncSession], Awaitable[None]] | None,
        after: Callable[[AsyncSession, builtins.list[MemoryOut]], Awaitable[None]] | None,
    ) -> builtins.list[MemoryOut]:
        principal.require_write()
        plans = await self._plan(principal, identity, items)
        if any(item.infer for item in items):
            raise ValidationFailed("infer is not available when replacing memories")
        who = resolve_identity(principal, identity, None, None)
        indexed: list[str] = []
        purged: list[MemoryRecord] = []
        try:
            async with self.db.session() as session:
                if before is not None:
                    await before(session)
                found = await repository.get_many(session, principal.user_id, list(dict.fromkeys(remove)))
                role = await self._role(who) if who.is_session else None
                old = [r for r in found.values() if not who.is_session or can_read(who, r.visibility, role=role)]
                if self.quotas is not None:  # early, before any embedding; reserve_memories below decides
                    await self.quotas.check_memories(principal.user_id, len(plans) - len(old))
                now = utcnow()
                records = [
                    _new_record(
                        principal, str(uuid.uuid4()), item.content, item, w, scope, visibility, writer_role, now
                    )
                    for item, w, scope, visibility, writer_role in plans
                ]
                indexed = [r.id for r in records]
                await self.engine.upsert([to_indexed(r) for r in records])
                # Ownership was checked on the rows above; purge skips points the index has already lost.
                await self.engine.purge([r.id for r in old])
                purged = old
                # The first write of the transaction, so that on SQLite the write lock is not held while embedding.
                if self.quotas is not None:
                    await self.quotas.reserve_memories(session, principal.user_id, len(records) - len(old))
                self._stamp(records)
                session.add_all(records)
                await session.flush()
                log_added(session, principal, records)
                mark_deleted(session, principal, who, old, now)
                self._stamp(old)
                await session.flush()
                await self._log(session, records, "upsert")
                await self._log(session, old, "delete")
                out = [to_out(r) for r in records]
                if after is not None:
                    await after(session, out)
        except BaseException:
            await self._purge_quietly(indexed)
            await self._reindex_quietly(purged)
            raise
        self._committed()
        if self.metrics is not None:
            self.metrics.memories_added.inc(len(records))
            self.metrics.memories_deleted.inc(len(old))
        return out

    async def _purge_quietly(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        try:
            await self.engine.purge(ids)
        except Exception:  # the index is derived; repair removes what this could not
            log.warning("could not remove %d unacknowledged memories from the index", len(ids), exc_info=True)

    async def import_records(
        self, principal: Principal, records: Sequence[MemoryRecord]
    ) -> tuple[builtins.list[str], builtins.list[str]]:
        """Store memories that keep the ids and times they had elsewhere (an import), all or none; the text is embedded
        again with this server's model. Returns (stored ids, ids passed over because this account has them already);
        an id another account holds is refused."""
        principal.require_write()
        for record in records:
            if record.user_id != principal.user_id:
                raise ValidationFailed("an import writes only into the importing account")
            self._check_fields(record.content, record.tags, record.metadata_)
        async with self.db.session() as session:
            present = await repository.existing_ids(session, [r.id for r in records])
        taken = sorted(i for i, owner in present.items() if owner != principal.user_id)
        if taken:
            raise Conflict(f"memory id {taken[0]} belongs to another account", ids=taken)
        fresh = [r for r in records if r.id not in present]
        if not fresh:
            return [], [r.id for r in records]
        if self.quotas is not None:
            await self.quotas.check_memories(principal.user_id, len(fresh))
        try:
            async with self.db.session() as session:
                await self.engine.upsert(await with_context(session, fresh))

            await self.db.write(await self._storing(principal, fresh))
        except BaseException:
            await self._purge_quietly([r.id for r in fresh])
            raise
        self._committed()
        if self.metrics is not None:
            self.metrics.memories_added.inc(len(fresh))
        return [r.id for r in fresh], [r.id for r in records if r.id in present]
