"""The memory rules, written once for REST and MCP: scopes, limits, tenant isolation, ordering of writes.

The database is the record; the vector index is derived from it. A write is acknowledged only after both hold it,
so an acknowledged write survives a crash, and the index can always be rebuilt from the database (``reindex``).
Writes go index-first because mem0 chooses the memory ids; a failed database commit removes what was indexed.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.principal import Principal
from app.db import Database, utcnow
from app.errors import MemoryTooLarge, NotFound, PayloadTooLarge, ValidationFailed
from app.identity import Identity
from app.memories import repository
from app.memories.engine import IndexedMemory, MemoryEngine
from app.memories.models import MemoryEvent, MemoryRecord
from app.memories.schemas import (
    CreatedMemory,
    HistoryEntry,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    SearchIn,
    SearchResult,
    Topic,
)
from app.memories.scopes import Scope, can_read, default_scope, readable_keys, viewer, visibility_key
from app.observability.metrics import Metrics
from app.quotas.service import Quotas

log = logging.getLogger(__name__)

_RECORD_COLUMNS = (
    "id",
    "user_id",
    "session",
    "agent",
    "scope",
    "visibility",
    "content",
    "tags",
    "metadata_",
    "created_at",
)


@dataclass(frozen=True, slots=True)
class Limits:
    max_memory_chars: int
    max_batch_size: int


def to_out(record: MemoryRecord) -> MemoryOut:
    return MemoryOut(
        id=record.id,
        content=record.content,
        scope=record.scope,
        tags=list(record.tags or []),
        metadata=dict(record.metadata_ or {}),
        session=record.session,
        agent=record.agent,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def to_indexed(record: MemoryRecord) -> IndexedMemory:
    return IndexedMemory(
        id=record.id,
        user_id=record.user_id,
        visibility=record.visibility,
        scope=record.scope,
        session=record.session,
        agent=record.agent,
        content=record.content,
        tags=list(record.tags or []),
        metadata=dict(record.metadata_ or {}),
        created_at=record.created_at.isoformat(),
    )


def encode_cursor(record: MemoryRecord) -> str:
    return base64.urlsafe_b64encode(f"{record.created_at.isoformat()}|{record.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, _, memory_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), memory_id
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ValidationFailed("cursor is not one this API returned", field="cursor") from exc


def resolve_identity(
    principal: Principal, identity: Identity | None, session: str | None, agent: str | None
) -> Identity:
    """A session URL fixes the identity; a plain caller may name a session and agent per request."""
    if identity is not None and identity.is_session:
        if (session is not None and session != identity.session) or (agent is not None and agent != identity.agent):
            raise ValidationFailed("this endpoint is bound to one session and agent; do not name another")
        return identity
    return viewer(principal.user_id, session, agent)


class MemoryService:
    """Memory operations on behalf of a principal. Created once; holds the database and the index."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine,
        limits: Limits,
        quotas: Quotas | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.db = db
        self.engine = engine
        self.limits = limits
        self.quotas = quotas
        self.metrics = metrics

    def _check_content(self, content: str) -> None:
        if "\x00" in content:
            # PostgreSQL cannot store it; refuse it on every database so that data moves between them.
            raise ValidationFailed("memory content must not contain NUL (\\0) characters", field="content")
        if len(content) > self.limits.max_memory_chars:
            raise MemoryTooLarge(f"memory is {len(content)} characters; the limit is {self.limits.max_memory_chars}")

    async def add(
        self, principal: Principal, identity: Identity | None, items: Sequence[MemoryIn]
    ) -> list[CreatedMemory]:
        """Store memories (all or none) and return what was stored; infer may turn one text into several facts."""
        principal.require_write()
        if len(items) > self.limits.max_batch_size:
            raise PayloadTooLarge(f"a batch holds at most {self.limits.max_batch_size} memories")
        plans: list[tuple[MemoryIn, Identity, Scope, str]] = []
        for item in items:
            self._check_content(item.content)
            who = resolve_identity(principal, identity, item.session, item.agent)
            scope = item.scope or default_scope(who)
            plans.append((item, who, scope, visibility_key(scope, who)))
            if item.infer and not self.engine.infer_available:
                raise ValidationFailed("infer needs an LLM; this server has none configured (ENGRAM_LLM_BASE_URL)")

        if self.quotas is not None:
            await self.quotas.check_memories(principal.user_id, len(plans))
        indexed: list[str] = []
        records: list[MemoryRecord] = []
        try:
            for item, who, scope, visibility in plans:
                now = utcnow()
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
                )
                for outcome in outcomes:
                    indexed.append(outcome.id)
                    records.append(
                        MemoryRecord(
                            id=outcome.id,
                            user_id=principal.user_id,
                            session=who.session,
                            agent=who.agent,
                            scope=scope,
                            visibility=visibility,
                            content=outcome.content,
                            tags=list(item.tags),
                            metadata_=dict(item.metadata),
                            created_at=now,
                            updated_at=now,
                        )
                    )
            async with self.db.session() as session:
                session.add_all(records)
                await session.flush()
                session.add_all(
                    MemoryEvent(
                        memory_id=r.id,
                        user_id=r.user_id,
                        event="ADD",
                        new_content=r.content,
                        actor=_actor(principal, r.session, r.agent),
                        created_at=r.created_at,
                    )
                    for r in records
                )
        except BaseException:
            await self._unindex(principal.user_id, indexed)
            raise
        if self.metrics is not None:
            self.metrics.memories_added.inc(len(records))
        return [CreatedMemory(**to_out(r).model_dump(), event="ADD") for r in records]

    async def _unindex(self, user_id: str, ids: Sequence[str]) -> None:
        for memory_id in ids:
            try:
                await self.engine.delete(user_id=user_id, memory_id=memory_id)
            except Exception:  # the index is derived; repair removes what this could not
                log.warning("could not remove unacknowledged memory %s from the index", memory_id, exc_info=True)

    async def search(
        self,
        principal: Principal,
        identity: Identity | None,
        request: SearchIn,
        *,
        owner_view: bool = False,
        scope: Scope | None = None,
    ) -> list[SearchResult]:
        """Semantic search over the memories this identity may read, best first.

        ``owner_view`` (the dashboard) searches every memory of the user, or those written in the session (and by the
        agent) it names, whatever their scope."""
        who = resolve_identity(principal, identity, request.session, request.agent)
        everything = owner_view
        narrowed = everything and who.is_session
        hits = await self.engine.search(
            user_id=principal.user_id,
            query=request.query,
            visibilities=None if everything else readable_keys(who, scope),
            scope=scope,
            # The index filters by visibility, not by where a memory was written: over-fetch, then narrow below.
            limit=min(request.limit * 4, 200) if narrowed else request.limit,
            threshold=request.threshold,
            tags=list(request.tags) if request.tags else None,
            metadata=request.metadata,
        )
        results: list[SearchResult] = []
        for hit in hits:
            memory = hit.memory
            # Served from the index payload, which writes keep in step with the record; still, never trust it
            # across a tenant or visibility boundary.
            if memory.user_id != principal.user_id or not (everything or can_read(who, memory.visibility)):
                log.error("index returned memory %s outside the caller's view; skipped", hit.id)
                continue
            if narrowed and (memory.session != who.session or (who.agent and memory.agent != who.agent)):
                continue
            if len(results) == request.limit:
                break
            results.append(
                SearchResult(
                    id=memory.id,
                    content=memory.content,
                    score=round(hit.score, 6),
                    scope=memory.scope,
                    tags=memory.tags,
                    metadata=memory.metadata,
                    session=memory.session,
                    agent=memory.agent,
                    created_at=datetime.fromisoformat(memory.created_at),
                )
            )
        return results

    async def list(
        self,
        principal: Principal,
        identity: Identity | None,
        *,
        session: str | None = None,
        agent: str | None = None,
        scope: Scope | None = None,
        tags: Sequence[str] = (),
        limit: int = 50,
        cursor: str | None = None,
        owner_view: bool = False,
    ) -> MemoryPage:
        """The readable memories, newest first, one page at a time; tags must all be present.

        ``owner_view`` (the dashboard) lists every memory of the user, or those written in the session (and by the
        agent) it names, whatever their scope."""
        who = resolve_identity(principal, identity, session, agent)
        if not 1 <= limit <= 200:
            raise ValidationFailed("limit must be between 1 and 200", field="limit")
        everything = owner_view
        visibilities = None if everything else readable_keys(who, scope)
        after = decode_cursor(cursor) if cursor else None
        wanted = set(tags)
        out: list[MemoryRecord] = []
        async with self.db.session() as db_session:
            # Tag filtering happens here rather than in SQL because JSON containment differs between the backends.
            while len(out) < limit:
                rows = await repository.page(
                    db_session,
                    principal.user_id,
                    visibilities,
                    limit=limit if not wanted else limit * 4,
                    after=after,
                    scope=scope if everything else None,
                    written_in=(who.session, who.agent) if everything else (None, None),
                )
                if not rows:
                    break
                for row in rows:
                    after = (row.created_at, row.id)
                    if wanted.issubset(row.tags or []):
                        out.append(row)
                        if len(out) == limit:
                            break
                if len(rows) < (limit if not wanted else limit * 4):
                    break
        more = len(out) == limit
        return MemoryPage(memories=[to_out(r) for r in out], next_cursor=encode_cursor(out[-1]) if more else None)

    async def _readable(
        self, session: AsyncSession, principal: Principal, who: Identity, memory_id: str
    ) -> MemoryRecord:
        record = await repository.get(session, principal.user_id, memory_id)
        # A session agent reaches only what it may read; the owner reaches every memory of theirs by id.
        if record is None or (who.is_session and not can_read(who, record.visibility)):
            raise NotFound(f"no memory {memory_id}")
        return record

    async def get(self, principal: Principal, identity: Identity | None, memory_id: str) -> MemoryOut:
        """One memory by id; another tenant's id answers as if it did not exist."""
        who = resolve_identity(principal, identity, None, None)
        async with self.db.session() as session:
            return to_out(await self._readable(session, principal, who, memory_id))

    async def update(
        self, principal: Principal, identity: Identity | None, memory_id: str, patch: MemoryPatch
    ) -> MemoryOut:
        """Change a memory's content, tags or metadata; the index follows."""
        principal.require_write()
        if patch.content is None and patch.tags is None and patch.metadata is None:
            raise ValidationFailed("nothing to update: give content, tags or metadata")
        if patch.content is not None:
            self._check_content(patch.content)
        who = resolve_identity(principal, identity, None, None)
        before: MemoryRecord | None = None
        try:
            async with self.db.session() as session:
                record = await self._readable(session, principal, who, memory_id)
                before = MemoryRecord(**{c: getattr(record, c) for c in _RECORD_COLUMNS})
                await self.engine.update(
                    user_id=principal.user_id,
                    memory_id=memory_id,
                    content=patch.content,
                    tags=list(patch.tags) if patch.tags is not None else None,
                    metadata=dict(patch.metadata) if patch.metadata is not None else None,
                )
                if patch.content is not None:
                    record.content = patch.content
                if patch.tags is not None:
                    record.tags = list(patch.tags)
                if patch.metadata is not None:
                    record.metadata_ = dict(patch.metadata)
                record.updated_at = utcnow()
                session.add(
                    MemoryEvent(
                        memory_id=record.id,
                        user_id=record.user_id,
                        event="UPDATE",
                        old_content=before.content,
                        new_content=record.content,
                        actor=_actor(principal, who.session, who.agent),
                        created_at=record.updated_at,
                    )
                )
                out = to_out(record)
        except BaseException:
            if before is not None:  # the index may already hold the new version: put the recorded one back
                await self._reindex_quietly([before])
            raise
        return out

    async def delete(
        self, principal: Principal, identity: Identity | None, memory_ids: Sequence[str]
    ) -> builtins.list[str]:
        """Delete memories (all or none). The record keeps a deleted mark and its history."""
        principal.require_write()
        who = resolve_identity(principal, identity, None, None)
        async with self.db.session() as session:
            records = [await self._readable(session, principal, who, memory_id) for memory_id in memory_ids]
            # Index first: searches answer from the index, so a memory must leave it before the delete is reported.
            removed: list[MemoryRecord] = []
            try:
                for record in records:
                    await self.engine.delete(user_id=principal.user_id, memory_id=record.id)
                    removed.append(record)
                now = utcnow()
                for record in records:
                    record.deleted_at = now
                    session.add(
                        MemoryEvent(
                            memory_id=record.id,
                            user_id=record.user_id,
                            event="DELETE",
                            old_content=record.content,
                            actor=_actor(principal, who.session, who.agent),
                            created_at=now,
                        )
                    )
                await session.flush()
            except BaseException:
                await self._reindex_quietly(removed)
                raise
        if self.metrics is not None:
            self.metrics.memories_deleted.inc(len(records))
        return [r.id for r in records]

    async def _reindex_quietly(self, records: Sequence[MemoryRecord]) -> None:
        """Put records back into the index after a write that did not complete (all or nothing)."""
        if not records:
            return
        try:
            await self.engine.upsert([to_indexed(r) for r in records])
        except Exception:  # repair at the next start restores what this could not
            log.warning("could not restore %d memories to the index", len(records), exc_info=True)

    async def history(
        self, principal: Principal, identity: Identity | None, memory_id: str
    ) -> builtins.list[HistoryEntry]:
        """Every change of a memory, oldest first; deleted memories keep theirs."""
        who = resolve_identity(principal, identity, None, None)
        async with self.db.session() as session:
            record = await repository.any_record(session, principal.user_id, memory_id)
            if record is None or (who.is_session and not can_read(who, record.visibility)):
                raise NotFound(f"no memory {memory_id}")
            events = await repository.history(session, principal.user_id, memory_id)
        return [
            HistoryEntry(
                event=e.event,
                old_content=e.old_content,
                new_content=e.new_content,
                actor=e.actor,
                created_at=e.created_at,
            )
            for e in events
        ]

    async def topics(
        self, principal: Principal, identity: Identity | None, *, session: str | None = None, agent: str | None = None
    ) -> builtins.list[Topic]:
        """The tags of the readable memories with how many memories carry each, most used first."""
        who = resolve_identity(principal, identity, session, agent)
        async with self.db.session() as db_session:
            tag_lists = await repository.tags_of(db_session, principal.user_id, readable_keys(who))
        counts = Counter(tag for tags in tag_lists for tag in tags)
        return [Topic(tag=tag, count=count) for tag, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    async def reindex(self) -> int:
        """Rebuild the whole vector index from the database."""
        await self.engine.reset()
        total = 0
        async with self.db.session() as session:
            async for batch in repository.stream_live(session):
                await self.engine.upsert([to_indexed(r) for r in batch])
                total += len(batch)
        return total

    async def repair(self) -> tuple[int, int]:
        """Make the index match the database: add live rows it lacks, drop points no live row backs."""
        async with self.db.session() as session:
            live = await repository.live_ids(session)
        indexed = await self.engine.ids()
        missing = sorted(live - indexed)
        orphans = sorted(indexed - live)
        for start in range(0, len(missing), 500):
            async with self.db.session() as session:
                rows = await repository.by_ids(session, missing[start : start + 500])
            await self.engine.upsert([to_indexed(r) for r in rows])
        if orphans:
            await self.engine.purge(orphans)
        return len(missing), len(orphans)


def _actor(principal: Principal, session: str | None, agent: str | None) -> str:
    who = principal.user_id if session is None else f"{principal.user_id}/{session}/{agent or '-'}"
    return f"{who} via {principal.key_id or principal.via}"
