"""Writes to stored memories for MemoryService: update (content, tags, metadata, or a wider reach) and delete."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence

from app.accounts.principal import Principal
from app.db import utcnow
from app.errors import ValidationFailed
from app.identity import Identity
from app.memories.events import actor_of, edits, history_event, mark_deleted
from app.memories.models import MemoryRecord
from app.memories.records import to_out, with_context
from app.memories.schemas import MemoryOut, MemoryPatch
from app.memories.scopes import Scope, check_widening, visibility_key, visibility_of
from app.memories.service_base import MemoryServiceBase, resolve_identity

_RECORD_COLUMNS = (
    "id",
    "user_id",
    "session",
    "agent",
    "end_user",
    "scope",
    "visibility",
    "role",
    "content",
    "tags",
    "metadata_",
    "created_at",
)


class MemoryEdits(MemoryServiceBase):
    """Every memory is read and every change checked before the index is written; a failure puts the index back."""

    async def update(
        self, principal: Principal, identity: Identity | None, memory_id: str, patch: MemoryPatch
    ) -> MemoryOut:
        """Change a memory's content, tags or metadata, or widen its reach (scope, private -> public); the index
        follows. Widening is recorded in the history as a PROMOTE; narrowing is refused."""
        async with self._guard([memory_id]):
            (out,) = await self._update(principal, identity, {memory_id: patch})
        return out

    async def update_many(
        self, principal: Principal, identity: Identity | None, patches: Mapping[str, MemoryPatch]
    ) -> builtins.list[MemoryOut]:
        """Apply each memory's patch as ``update`` does, all or none: every memory is read and every change checked
        before the index is written, and a failure on any one leaves every memory as it was."""
        async with self._guard(builtins.list(patches)):
            return await self._update(principal, identity, patches)

    async def _update(
        self, principal: Principal, identity: Identity | None, patches: Mapping[str, MemoryPatch]
    ) -> builtins.list[MemoryOut]:
        principal.require_write()
        for patch in patches.values():
            if not edits(patch) and patch.scope is None and patch.visibility is None:
                raise ValidationFailed("nothing to update: give content, tags, metadata, scope or visibility")
            self._check_fields(patch.content, patch.tags, patch.metadata)
        who = resolve_identity(principal, identity, None, None)
        # The recorded version of each memory whose index point this write reached (or may have reached).
        touched: builtins.list[MemoryRecord] = []
        try:
            async with self.db.session() as session:
                planned = []
                for memory_id, patch in patches.items():
                    record = await self._readable(session, principal, who, memory_id)
                    planned.append((record, patch, await self._promotion(record, patch)))
                actor = actor_of(principal, who.session, who.agent)
                for record, patch, promotion in planned:
                    before = MemoryRecord(**{c: getattr(record, c) for c in _RECORD_COLUMNS})
                    touched.append(before)
                    if promotion is None:
                        await self.engine.update(
                            user_id=principal.user_id,
                            memory_id=record.id,
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
                    if edits(patch):
                        session.add(history_event(record, "UPDATE", actor, old_content=before.content))
                    if promotion is not None:
                        scope, key, role, detail = promotion
                        record.scope, record.visibility, record.role = scope, key, role
                        # The point's visibility key changes, so the whole point is written again; with the vector
                        # it has when the text stays (embedding the same text again would be a model run for nothing).
                        kept = await self.engine.vectors([record.id]) if patch.content is None else {}
                        vectors = {i: v for i, (point, v) in kept.items() if point.content == record.content}
                        await self.engine.upsert(await with_context(session, [record]), vectors)
                        session.add(history_event(record, "PROMOTE", actor, detail=detail))
                records = [record for record, _, _ in planned]
                self._stamp(records)
                await self._log(session, records, "upsert")
                out = [to_out(record) for record in records]
        except BaseException:
            # The index may already hold some of the new versions: put the recorded ones back.
            await self._reindex_quietly(touched)
            raise
        self._committed()
        return out

    async def _promotion(self, record: MemoryRecord, patch: MemoryPatch) -> tuple[Scope, str, str | None, str] | None:
        """The new (scope, key, role, history detail) a patch widens a memory to; None when its reach stays."""
        old_scope: Scope = record.scope  # type: ignore[assignment]
        old_visibility = visibility_of(record.visibility)
        scope = patch.scope or old_scope
        visibility = patch.visibility or old_visibility
        if scope == old_scope and visibility == old_visibility:
            return None
        check_widening(old_scope, scope, old_visibility, visibility)
        writer = Identity(record.user_id, record.session, record.agent)
        role = record.role if scope == "role" else None
        if scope == "role" and role is None:
            role = await self._role(writer)  # agent -> role: the role its writer joined the session with
        key = visibility_key(scope, writer, role=role, visibility=visibility)
        changes = [f"scope: {old_scope} -> {scope}"] if scope != old_scope else []
        if visibility != old_visibility:
            changes.append(f"visibility: {old_visibility} -> {visibility}")
        return scope, key, role, "; ".join(changes)

    async def delete(
        self, principal: Principal, identity: Identity | None, memory_ids: Sequence[str]
    ) -> builtins.list[str]:
        """Delete memories (all or none). The record keeps a deleted mark and its history."""
        async with self._guard(memory_ids):
            return await self._delete(principal, identity, memory_ids)

    async def _delete(
        self, principal: Principal, identity: Identity | None, memory_ids: Sequence[str]
    ) -> builtins.list[str]:
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
                mark_deleted(session, principal, who, records, utcnow())
                self._stamp(records)
                await session.flush()
                await self._log(session, records, "delete")
            except BaseException:
                await self._reindex_quietly(removed)
                raise
        self._committed()
        if self.metrics is not None:
            self.metrics.memories_deleted.inc(len(records))
        return [r.id for r in records]
