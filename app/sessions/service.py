"""Coordination rules for a session's agents, written once for the MCP tools and the REST routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

from app.accounts.principal import Principal
from app.coordination import Coordination, Event, SessionKey
from app.coordination.events import change_event
from app.db import utcnow
from app.errors import ValidationFailed
from app.identity import Identity
from app.observability.metrics import Metrics
from app.sessions.schemas import (
    AgentOut,
    ChangeOut,
    ClaimFilesResult,
    ClaimOut,
    ConflictOut,
    NotReleasedOut,
    ReleaseFilesResult,
    SessionStatus,
    SyncResult,
)

MAX_CLAIM_MINUTES = 24 * 60
MAX_SYNC_MINUTES = 7 * 24 * 60
STATUS_CHANGES = 10
MISSED_PAGE = 1000


def session_key(identity: Identity) -> SessionKey:
    if identity.session is None or identity.agent is None:
        raise ValidationFailed("coordination needs a session and an agent (a USER__session__SESSION__AGENT id)")
    return SessionKey(identity.user_id, identity.session)


class SessionService:
    """Claims, changes, presence and live events for the agent an identity names."""

    def __init__(self, coordination: Coordination, metrics: Metrics | None = None) -> None:
        self.coordination = coordination
        self.metrics = metrics

    async def _enter(self, identity: Identity, *, touch: bool = True) -> tuple[SessionKey, str]:
        """The session key and agent of ``identity``, marking the agent present unless the operation does so itself."""
        key = session_key(identity)
        assert identity.agent is not None
        if touch:
            await self.coordination.touch(key, identity.agent)
        return key, identity.agent

    async def claim_files(
        self,
        principal: Principal,
        identity: Identity,
        file_paths: Sequence[str],
        operation: str = "write",
        duration_minutes: int = 30,
    ) -> ClaimFilesResult:
        """Claim every file or none; re-claiming as the same agent extends the claim."""
        principal.require_write()
        if not 1 <= duration_minutes <= MAX_CLAIM_MINUTES:
            raise ValidationFailed(f"duration_minutes must be from 1 to {MAX_CLAIM_MINUTES}", field="duration_minutes")
        key, agent = await self._enter(identity, touch=False)  # the operation marks the agent present
        result = await self.coordination.claim(key, agent, list(file_paths), operation, duration_minutes * 60)
        if self.metrics is not None:
            self.metrics.claims.labels("conflict" if result.conflicts else "granted").inc()
        return ClaimFilesResult(
            granted=not result.conflicts,
            claims=[ClaimOut.of(c) for c in result.granted],
            conflicts=[ConflictOut.of(c) for c in result.conflicts],
        )

    async def release_files(
        self, principal: Principal, identity: Identity, file_paths: Sequence[str]
    ) -> ReleaseFilesResult:
        """Release the files this agent holds; only the holder can release a claim."""
        principal.require_write()
        key, agent = await self._enter(identity, touch=False)  # the operation marks the agent present
        result = await self.coordination.release(key, agent, list(file_paths))
        return ReleaseFilesResult(
            released=result.released,
            not_released=[NotReleasedOut.of(item) for item in result.not_held],
        )

    async def broadcast_change(
        self, principal: Principal, identity: Identity, file_paths: Sequence[str], changes_summary: str
    ) -> ChangeOut:
        """Append a change to the session's feed; the other agents see it by sync and by push."""
        principal.require_write()
        key, agent = await self._enter(identity, touch=False)  # the operation marks the agent present
        return ChangeOut.of(await self.coordination.broadcast(key, agent, list(file_paths), changes_summary))

    async def sync_changes(
        self,
        principal: Principal,
        identity: Identity,
        since: str | None = None,
        minutes: int = 30,
        include_own: bool = False,
    ) -> SyncResult:
        """The other agents' changes after cursor ``since``, or of the last ``minutes`` without one, in order."""
        if not 1 <= minutes <= MAX_SYNC_MINUTES:
            raise ValidationFailed(f"minutes must be from 1 to {MAX_SYNC_MINUTES}", field="minutes")
        key, agent = await self._enter(identity)
        page = await self.coordination.changes(
            key,
            since=since or None,
            since_time=None if since else utcnow() - timedelta(minutes=minutes),
            exclude_agent=None if include_own else agent,
        )
        return SyncResult(changes=[ChangeOut.of(c) for c in page.changes], cursor=page.cursor)

    async def status(self, principal: Principal, identity: Identity) -> SessionStatus:
        """Who is in the session and when each was last seen, the active claims, and the latest changes."""
        key, agent = await self._enter(identity)
        agents = await self.coordination.presence(key)
        claims = await self.coordination.claims(key)
        page = await self.coordination.changes(key, since_time=utcnow() - timedelta(days=7), limit=1000)
        return SessionStatus(
            session=key.session,
            you=agent,
            agents=[AgentOut.of(p) for p in agents],
            claims=[ClaimOut.of(c) for c in claims],
            recent_changes=[ChangeOut.of(c) for c in page.changes[-STATUS_CHANGES:]],
        )

    async def missed_changes(self, identity: Identity, since: str) -> list[Event]:
        """Every change after cursor ``since`` (everyone's, oldest first) as live events, for a reconnecting stream."""
        key = session_key(identity)
        missed: list[Event] = []
        while True:  # bounded: the feed keeps at most about FEED_MAX_ENTRIES changes
            page = await self.coordination.changes(key, since=since, limit=MISSED_PAGE)
            missed.extend(change_event(c) for c in page.changes)
            if len(page.changes) < MISSED_PAGE:
                break
            since = page.cursor
        return missed

    def events(self, identity: Identity) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        """Live claim, release and change events of the identity's session."""
        return self.coordination.subscribe(session_key(identity))
