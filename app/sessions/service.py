"""Coordination rules for a session's agents, written once for the MCP tools and the REST routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.accounts.principal import Principal
from app.coordination import Coordination, Event, SessionKey
from app.coordination.events import change_event
from app.db import utcnow
from app.errors import ValidationFailed
from app.identity import Identity
from app.observability.metrics import Metrics
from app.sessions.schemas import (
    ChangeOut,
    ClaimFilesResult,
    ClaimOut,
    ConflictOut,
    NotReleasedOut,
    ReleaseFilesResult,
    SessionStatus,
    SyncResult,
)
from app.teams.schemas import AgentOut
from app.teams.service import TeamService

MAX_CLAIM_MINUTES = 24 * 60
MAX_SYNC_MINUTES = 7 * 24 * 60
STATUS_CHANGES = 10
MISSED_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Missed:
    """What a reconnecting stream missed, and whether the feed was reset under it."""

    events: list[Event]
    reset: bool
    cursor: str


RESET_MESSAGE = (
    "the session's change feed was reset (its store restarted without its data): changes made before the reset may "
    "have been lost; what follows is the new feed from its start"
)


def session_key(identity: Identity) -> SessionKey:
    if identity.session is None or identity.agent is None:
        raise ValidationFailed("coordination needs a session and an agent (a USER__session__SESSION__AGENT id)")
    return SessionKey(identity.user_id, identity.session)


class SessionService:
    """Claims, changes, presence and live events for the agent an identity names."""

    def __init__(
        self, coordination: Coordination, metrics: Metrics | None = None, team: TeamService | None = None
    ) -> None:
        self.coordination = coordination
        self.metrics = metrics
        self.team = team

    async def _enter(self, identity: Identity, *, touch: bool = True) -> tuple[SessionKey, str]:
        """The session key and agent of ``identity``, marking the agent present unless the operation does so itself."""
        key = session_key(identity)
        assert identity.agent is not None
        if self.team is not None:
            await self.team.seen(identity)  # the registry's record of use; rate-limited per agent
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
        return SyncResult(changes=[ChangeOut.of(c) for c in page.changes], cursor=page.cursor, reset=page.reset)

    async def status(self, principal: Principal, identity: Identity) -> SessionStatus:
        """Who is in the session (role, capabilities, client, active or idle, last seen, files and task), the
        active claims, and the latest changes. Without an agent (a dashboard, a script) it reads without joining."""
        if identity.session is None:
            raise ValidationFailed("a session is needed")
        if identity.agent is not None:
            key, _ = await self._enter(identity)
        else:
            key = SessionKey(identity.user_id, identity.session)
        presence = await self.coordination.presence(key)
        claims = await self.coordination.claims(key)
        page = await self.coordination.changes(key, since_time=utcnow() - timedelta(days=7), limit=1000)
        if self.team is not None:
            agents = await self.team.roster(key, presence, claims)
        else:
            agents = [AgentOut(agent=p.agent, last_seen=p.last_seen) for p in presence]
        return SessionStatus(
            session=key.session,
            you=identity.agent,
            agents=agents,
            claims=[ClaimOut.of(c) for c in claims],
            recent_changes=[ChangeOut.of(c) for c in page.changes[-STATUS_CHANGES:]],
        )

    async def missed_changes(
        self, identity: Identity, since: str | None, *, since_time: datetime | None = None
    ) -> Missed:
        """Every change after cursor ``since`` (or from ``since_time``; everyone's, oldest first) as live events, for
        a (re)connecting stream; ``reset`` when the feed that cursor pointed into is gone (then the events are the
        whole current feed)."""
        key = session_key(identity)
        missed: list[Event] = []
        reset = False
        while True:  # bounded: the feed keeps at most about FEED_MAX_ENTRIES changes
            page = await self.coordination.changes(
                key, since=since, since_time=since_time if since is None else None, limit=MISSED_PAGE
            )
            reset = reset or page.reset
            missed.extend(change_event(c) for c in page.changes)
            if len(page.changes) < MISSED_PAGE:
                break
            since = page.cursor
        return Missed(missed, reset, page.cursor)

    def events(self, identity: Identity) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        """Live claim, release and change events of the identity's session."""
        return self.coordination.subscribe(session_key(identity))
