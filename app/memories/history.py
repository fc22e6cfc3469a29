"""A memory's history for MemoryService: its changes, a page at a time, deleted memories included."""

from __future__ import annotations

from app.accounts.principal import Principal
from app.errors import NotFound, ValidationFailed
from app.identity import Identity
from app.memories import repository
from app.memories.schemas import HISTORY_PAGE, MAX_EVENT_ID, MAX_HISTORY_PAGE, HistoryEntry, HistoryResponse
from app.memories.scopes import can_read
from app.memories.service_base import MemoryServiceBase, resolve_identity


class MemoryHistory(MemoryServiceBase):
    """What happened to a memory, as its reader may see it."""

    async def history(
        self,
        principal: Principal,
        identity: Identity | None,
        memory_id: str,
        *,
        limit: int = HISTORY_PAGE,
        after: int | None = None,
    ) -> HistoryResponse:
        """A page of a memory's changes, oldest first, after the event ``after``; deleted memories keep theirs."""
        if not 1 <= limit <= MAX_HISTORY_PAGE:
            raise ValidationFailed(f"limit must be between 1 and {MAX_HISTORY_PAGE}", field="limit")
        if after is not None and not 0 <= after <= MAX_EVENT_ID:
            raise ValidationFailed(f"after must be an event id between 0 and {MAX_EVENT_ID}", field="after")
        who = resolve_identity(principal, identity, None, None)
        async with self.db.session() as session:
            record = await repository.any_record(session, principal.user_id, memory_id)
            if record is None or (who.is_session and not can_read(who, record.visibility, role=await self._role(who))):
                raise NotFound(f"no memory {memory_id}")
            # One more than the page: whether there is a next page, without counting the rest.
            events = await repository.history(session, principal.user_id, memory_id, limit=limit + 1, after=after)
        page = events[:limit]
        entries = [
            HistoryEntry(
                event=e.event,
                old_content=e.old_content,
                new_content=e.new_content,
                actor=e.actor,
                created_at=e.created_at,
                detail=e.detail,
            )
            for e in page
        ]
        return HistoryResponse(memory_id=memory_id, history=entries, next=page[-1].id if len(events) > limit else None)
