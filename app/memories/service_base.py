"""What every part of MemoryService shares: its dependencies, who may read what, the text rules, the change log."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.accounts.principal import Principal
from app.db import Database
from app.errors import MemoryTooLarge, NotFound, ValidationFailed
from app.identity import Identity
from app.memories import repository
from app.memories.engine import MemoryEngine
from app.memories.models import MemoryRecord
from app.memories.records import with_context
from app.memories.scopes import can_read, viewer
from app.observability.metrics import Metrics
from app.quotas.service import Quotas
from app.text import check_metadata, check_text

if TYPE_CHECKING:
    from app.sync.changelog import ChangeLog

# Named for the module the service was written in, so that log filters and alerts on it still match its parts.
log = logging.getLogger("app.memories.service")

# The role an identity's agent joined its session with (the teams registry), or None.
RoleLookup = Callable[[Identity], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Limits:
    max_memory_chars: int
    max_batch_size: int
    # The search threshold when a request names none (calibrated: see the README's "Search").
    search_threshold: float = 0.05


def resolve_identity(
    principal: Principal, identity: Identity | None, session: str | None, agent: str | None
) -> Identity:
    """A session URL fixes the identity; a plain caller may name a session and agent per request. An agent outside
    any session (Mem0's agent_id without a run_id) is only ever given by the Mem0 routes, never by a caller."""
    if identity is not None and (identity.is_session or identity.agent is not None):
        principal.require_identity(identity)
        if (session is not None and session != identity.session) or (agent is not None and agent != identity.agent):
            raise ValidationFailed("this endpoint is bound to one session and agent; do not name another")
        return identity
    return viewer(principal, session, agent)


class MemoryServiceBase:
    """The dependencies of MemoryService and the checks its writes and reads share."""

    def __init__(
        self,
        db: Database,
        engine: MemoryEngine,
        limits: Limits,
        quotas: Quotas | None = None,
        metrics: Metrics | None = None,
        roles: RoleLookup | None = None,
        changes: ChangeLog | None = None,
    ) -> None:
        self.db = db
        self.engine = engine
        self.limits = limits
        self.quotas = quotas
        self.metrics = metrics
        self.roles = roles
        # The change log (app.sync): every write appends to it in its own transaction.
        self.changes = changes

    async def _role(self, who: Identity) -> str | None:
        """The role ``who`` reads role memories as: the one its agent joined the session with."""
        if self.roles is None or who.session is None or who.agent is None:
            return None
        return await self.roles(who)

    def _check_content(self, content: str) -> None:
        # The text rule holds on every database, so that data moves between them.
        check_text(content, "content")
        if len(content) > self.limits.max_memory_chars:
            raise MemoryTooLarge(f"memory is {len(content)} characters; the limit is {self.limits.max_memory_chars}")

    def _check_fields(
        self, content: str | None, tags: Sequence[str] | None, metadata: Mapping[str, Any] | None
    ) -> None:
        """The stored-text rule for every field, whoever calls (REST and MCP validated already; internal callers)."""
        if content is not None:
            self._check_content(content)
        for tag in tags or ():
            check_text(tag, "tags")
        if metadata is not None:
            check_metadata(metadata)

    async def _readable(
        self, session: AsyncSession, principal: Principal, who: Identity, memory_id: str
    ) -> MemoryRecord:
        record = await repository.get(session, principal.user_id, memory_id)
        # A session agent reaches only what it may read; the owner reaches every memory of theirs by id.
        if record is None or (who.is_session and not can_read(who, record.visibility, role=await self._role(who))):
            raise NotFound(f"no memory {memory_id}")
        return record

    def _guard(self, memory_ids: Sequence[str]) -> AbstractAsyncContextManager[None]:
        return self.changes.guard(memory_ids) if self.changes is not None else nullcontext()

    def _stamp(self, records: Sequence[MemoryRecord]) -> None:
        if self.changes is not None:
            self.changes.stamp(records)

    async def _log(
        self, session: AsyncSession, records: Sequence[MemoryRecord], op: Literal["upsert", "delete"]
    ) -> None:
        await session.run_sync(self._log_within, records, op)

    def _log_within(self, session: Session, records: Sequence[MemoryRecord], op: Literal["upsert", "delete"]) -> None:
        if self.changes is not None:
            self.changes.append_within(session, records, op)

    def _committed(self) -> None:
        if self.changes is not None:
            self.changes.committed()

    async def _reindex_quietly(self, records: Sequence[MemoryRecord]) -> None:
        """Put records back into the index after a write that did not complete (all or nothing)."""
        if not records:
            return
        try:
            async with self.db.session() as session:
                indexed = await with_context(session, records)
            await self.engine.upsert(indexed)
        except Exception:  # repair at the next start restores what this could not
            log.warning("could not restore %d memories to the index", len(records), exc_info=True)
