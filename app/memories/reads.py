"""Reads for MemoryService: search, list, get, topics and counts, each over what the caller may read."""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from app.accounts.principal import Principal
from app.errors import ValidationFailed
from app.identity import Identity
from app.memories import repository
from app.memories.models import MemoryRecord
from app.memories.records import decode_cursor, encode_cursor, index_time, to_out
from app.memories.schemas import MemoryCounts, MemoryOut, MemoryPage, SearchIn, SearchResult, Topic, source_of
from app.memories.scopes import Scope, readable_keys, visibility_of
from app.memories.service_base import MemoryServiceBase, log, resolve_identity

# The most rows one query reads while a tag filter scans for matches (a page of 200 starts at 800).
MAX_TAG_SCAN_BATCH = 4000


class MemoryReads(MemoryServiceBase):
    """Every read answers only with the caller's own tenant's memories, and of those only what it may read."""

    async def search(
        self,
        principal: Principal,
        identity: Identity | None,
        request: SearchIn,
        *,
        owner_view: bool = False,
        scope: Scope | None = None,
        entities: Mapping[str, Sequence[str]] | None = None,
        depth: int | None = None,
    ) -> list[SearchResult]:
        """Semantic search over the memories this identity may read, best first.

        ``owner_view`` (the dashboard) searches what ``_visible_keys`` gives the owner. ``entities`` narrows to
        memories whose end_user, session or agent field is one of the names given (the Mem0 routes' filters).
        ``depth`` asks for that many results instead of ``request.limit`` (the Mem0 routes filter them further)."""
        who = resolve_identity(principal, identity, request.session, request.agent)
        visibilities = await self._visible_keys(principal, who, scope, owner_view)
        narrowed = _entities(entities, request.end_user)
        wanted = depth or request.limit
        hits = await self.engine.search(
            user_id=principal.user_id,
            query=request.query,
            visibilities=visibilities,
            scope=scope,
            limit=wanted,
            threshold=self.limits.search_threshold if request.threshold is None else request.threshold,
            tags=list(request.tags) if request.tags else None,
            metadata=request.metadata,
            entities=narrowed,
        )
        results: list[SearchResult] = []
        for hit in hits:
            memory = hit.memory
            # Served from the index payload, which writes keep in step with the record; still, never trust it
            # across a tenant or visibility boundary.
            if memory.user_id != principal.user_id or (
                visibilities is not None and memory.visibility not in visibilities
            ):
                log.error("index returned memory %s outside the caller's view; skipped", hit.id)
                continue
            if narrowed is not None and any(getattr(memory, f) not in names for f, names in narrowed.items()):
                log.error("index returned memory %s outside the entities asked for; skipped", hit.id)
                continue
            if len(results) == wanted:
                break
            results.append(
                SearchResult(
                    id=memory.id,
                    content=memory.content,
                    score=round(hit.score, 6),
                    scope=memory.scope,
                    visibility=visibility_of(memory.visibility),
                    tags=memory.tags,
                    metadata=memory.metadata,
                    session=memory.session,
                    agent=memory.agent,
                    end_user=memory.end_user,
                    created_at=datetime.fromisoformat(memory.created_at),
                    updated_at=index_time(memory.updated_at),
                    source=source_of(memory.metadata),
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
        end_user: str | None = None,
    ) -> MemoryPage:
        """The readable memories, newest first, one page at a time; tags must all be present.

        ``owner_view`` (the dashboard) lists what ``_visible_keys`` gives the owner."""
        who = resolve_identity(principal, identity, session, agent)
        if not 1 <= limit <= 200:
            raise ValidationFailed("limit must be between 1 and 200", field="limit")
        after = decode_cursor(cursor) if cursor else None
        wanted = set(tags)
        out: list[MemoryRecord] = []
        visibilities = await self._visible_keys(principal, who, scope, owner_view)
        async with self.db.session() as db_session:
            # Tag filtering happens here rather than in SQL because JSON containment differs between the backends.
            # The batch doubles while a rare tag leaves pages unfilled, so a scan takes a few queries, not hundreds.
            batch = limit if not wanted else limit * 4
            while len(out) < limit:
                rows = await repository.page(
                    db_session,
                    principal.user_id,
                    visibilities,
                    limit=batch,
                    after=after,
                    # Always by the column too: a caller's private key holds memories of every scope.
                    scope=scope,
                    end_user=end_user,
                )
                if not rows:
                    break
                for row in rows:
                    after = (row.created_at, row.id)
                    if wanted.issubset(row.tags or []):
                        out.append(row)
                        if len(out) == limit:
                            break
                if len(rows) < batch:
                    break
                batch = min(batch * 2, MAX_TAG_SCAN_BATCH)
        more = len(out) == limit
        return MemoryPage(memories=[to_out(r) for r in out], next_cursor=encode_cursor(out[-1]) if more else None)

    async def _visible_keys(
        self, principal: Principal, who: Identity, scope: Scope | None, owner_view: bool
    ) -> builtins.list[str] | None:
        """The visibility keys a read returns (narrowed to those that can hold ``scope``); None is every memory.

        The owner's view (the dashboard) is every memory, or, with a session named, what that session's agents see:
        exactly the named agent's view, or without one, the union of the views of every agent that wrote there."""
        if not owner_view or who.agent is not None:
            return readable_keys(who, scope, role=await self._role(who))
        if who.session is None:
            return None
        keys = readable_keys(who, scope)
        # Only this view reads the database here; every other read (each search) goes without a transaction.
        async with self.db.session() as db_session:
            agents = await repository.agents_in(db_session, principal.user_id, who.session)
        for agent in agents:
            member = Identity(who.user_id, who.session, agent)
            keys += [k for k in readable_keys(member, scope, role=await self._role(member)) if k not in keys]
        return keys

    async def get(self, principal: Principal, identity: Identity | None, memory_id: str) -> MemoryOut:
        """One memory by id; another tenant's id answers as if it did not exist."""
        who = resolve_identity(principal, identity, None, None)
        async with self.db.session() as session:
            return to_out(await self._readable(session, principal, who, memory_id))

    async def topics(
        self, principal: Principal, identity: Identity | None, *, session: str | None = None, agent: str | None = None
    ) -> builtins.list[Topic]:
        """The tags of the readable memories with how many memories carry each, most used first."""
        who = resolve_identity(principal, identity, session, agent)
        async with self.db.session() as db_session:
            keys = readable_keys(who, role=await self._role(who))
            tag_lists = await repository.tags_of(db_session, principal.user_id, keys)
        counts = Counter(tag for tags in tag_lists for tag in tags)
        return [Topic(tag=tag, count=count) for tag, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    async def counts(self, principal: Principal) -> MemoryCounts:
        """The owner's live memories counted per session (None: user-wide), scope and tag, most first."""
        async with self.db.session() as db_session:
            sessions = await repository.counts_by(db_session, principal.user_id, "session")
            scopes = await repository.counts_by(db_session, principal.user_id, "scope")
            tags = Counter(
                tag for tag_list in await repository.all_tags(db_session, principal.user_id) for tag in tag_list
            )

        def most_first(counts: Mapping[str, int]) -> dict[str, int]:
            return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

        return MemoryCounts(
            total=sum(scopes.values()),
            sessions=most_first({name or "": n for name, n in sessions.items()}),
            scopes=most_first({name or "": n for name, n in scopes.items()}),
            tags=most_first(tags),
        )


def _entities(entities: Mapping[str, Sequence[str]] | None, end_user: str | None) -> dict[str, list[str]] | None:
    """The entity filter of a search: the caller's, narrowed to ``end_user`` when the request names one."""
    merged = {key: list(values) for key, values in (entities or {}).items()}
    if end_user is not None:
        allowed = merged.get("end_user")
        merged["end_user"] = [end_user] if allowed is None or end_user in allowed else []
    return merged or None
