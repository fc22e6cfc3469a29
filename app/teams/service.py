"""The team registry: who has used a session, who joined it with which role, and who is active now.

Presence has two sources that are merged when read: the coordination backend (every claim, release, broadcast, sync
and status, to the millisecond) and the database (every MCP call on a session URL, at most once per
``touch_every`` seconds per agent and instance, so that marking presence never costs a round trip per call).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.accounts.principal import Principal
from app.coordination import Claim, Coordination, Presence, SessionKey
from app.coordination.rules import DEFAULT_PRESENCE_TTL_SECONDS
from app.db import Database, utcnow
from app.errors import ValidationFailed
from app.identity import Identity
from app.teams import repository, task_repository
from app.teams.events import agent_event, task_event
from app.teams.models import SessionAgent
from app.teams.schemas import AgentOut, AgentsOut, JoinIn, LeaveOut

IDLE_AFTER = timedelta(minutes=5)
TOUCH_EVERY_SECONDS = 15.0
_MAX_REMEMBERED = 10_000
SESSIONS_SCANNED = 2_000


def agent_key(identity: Identity) -> tuple[SessionKey, str]:
    """The session and agent an identity acts as; team operations need both."""
    if identity.session is None or identity.agent is None:
        raise ValidationFailed("this needs a session and an agent (a USER__session__SESSION__AGENT id, or ?agent=)")
    return SessionKey(identity.user_id, identity.session), identity.agent


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session of the user for the dashboard's list: its agents (most recent first) and last activity."""

    session: str
    agents: list[SessionAgent]
    last_activity: datetime
    active: bool


class TeamService:
    """Joining, leaving, presence and the roster of a session's agents."""

    def __init__(
        self, db: Database, coordination: Coordination, *, touch_every_seconds: float = TOUCH_EVERY_SECONDS
    ) -> None:
        self.db = db
        self.coordination = coordination
        self._touch_every = touch_every_seconds
        self._touched: dict[tuple[str, str, str, bool], float] = {}

    async def seen(self, identity: Identity, *, revive: bool = True) -> None:
        """Mark a session agent present (any call it makes); a no-op if done lately for it on this instance.

        ``revive=False`` (a handshake, a stream, closing the client: anything but a tool call) leaves an agent that
        left gone: it shows again once it calls a tool."""
        if identity.session is None or identity.agent is None:
            return
        slot = (identity.user_id, identity.session, identity.agent)
        now = time.monotonic()
        # A tool call's mark stands for any call; a lesser one never stands for a tool call (it may not revive).
        marks = [self._touched.get((*slot, True))] + ([] if revive else [self._touched.get((*slot, False))])
        if any(last is not None and now - last < self._touch_every for last in marks):
            return
        if len(self._touched) >= _MAX_REMEMBERED:
            self._touched = {k: t for k, t in self._touched.items() if now - t < self._touch_every}
        self._touched[(*slot, revive)] = now
        async with self.db.session() as db:
            await repository.mark_seen(db, *slot, utcnow(), revive=revive)

    async def role_of(self, identity: Identity) -> str | None:
        """The role the identity's agent joined its session with, or None (not joined, or not a session agent)."""
        if identity.session is None or identity.agent is None:
            return None
        row = await self.db.first(repository.role_query(identity.user_id, identity.session, identity.agent))
        return None if row is None else row[0]

    async def join(self, principal: Principal, identity: Identity, request: JoinIn) -> AgentOut:
        """Enter the registry with a role, capabilities and client; joining again replaces them."""
        principal.require_write()
        key, agent = agent_key(identity)
        capabilities = list(dict.fromkeys(request.capabilities))
        now = utcnow()
        async with self.db.session() as db:
            row = await repository.join(
                db, key.user_id, key.session, agent, role=request.role, capabilities=capabilities,
                client=request.client, now=now,
            )  # fmt: skip
        await self.coordination.publish(key, agent_event(agent, "joined", request.role, now))
        return _agent_out(row, row.last_seen_at, now)

    async def leave(self, principal: Principal, identity: Identity) -> LeaveOut:
        """Leave the registry, giving back every claimed file and every unfinished task."""
        principal.require_write()
        key, agent = agent_key(identity)
        # Coordination first: if it is unreachable nothing has changed, and leaving again later does it all.
        held = [claim.path for claim in await self.coordination.claims(key) if claim.agent == agent]
        files = (await self.coordination.release(key, agent, held)).released if held else []
        await self.coordination.forget(key, agent)
        now = utcnow()
        async with self.db.session() as db:
            row = await repository.get_agent(db, key.user_id, key.session, agent)
            await repository.leave(db, key.user_id, key.session, agent, now)
            tasks = await task_repository.release_all(db, key.user_id, key.session, agent)
        for revive in (True, False):
            self._touched.pop((key.user_id, key.session, agent, revive), None)
        await self.coordination.publish(key, agent_event(agent, "left", row.role if row else None, now))
        if tasks:
            await self.coordination.publish(key, task_event(agent, "released", tasks, now))
        return LeaveOut(agent=agent, released_files=files, released_tasks=tasks)

    async def agents(self, principal: Principal, identity: Identity) -> AgentsOut:
        """The session's agents as ``roster`` describes them; reading does not make the reader an agent."""
        if identity.session is None:
            raise ValidationFailed("a session is needed")
        key = SessionKey(identity.user_id, identity.session)
        presence = await self.coordination.presence(key)
        claims = await self.coordination.claims(key)
        return AgentsOut(session=key.session, agents=await self.roster(key, presence, claims))

    async def roster(self, key: SessionKey, presence: list[Presence], claims: list[Claim]) -> list[AgentOut]:
        """Every agent of the session that is joined or was seen lately (and not since it left), most recent first:
        role, capabilities, client, active or idle, last seen, the files it holds and its tasks."""
        async with self.db.session() as db:
            rows = {row.agent: row for row in await repository.agents_of(db, key.user_id, key.session)}
            working = await task_repository.in_progress(db, key.user_id, key.session)
        now = utcnow()
        live = {p.agent: p.last_seen for p in presence}
        window = now - timedelta(seconds=DEFAULT_PRESENCE_TTL_SECONDS)
        files: dict[str, list[str]] = defaultdict(list)
        for claim in claims:
            files[claim.agent].append(claim.path)
        tasks: dict[str, list[str]] = defaultdict(list)
        for assignee, task_id in working:
            tasks[assignee].append(task_id)
        out: list[AgentOut] = []
        for name in {*rows, *live}:
            row = rows.get(name)
            if name not in live and (row is None or not _listed(row, window)):
                continue  # coordination forgets an agent that leaves, so being in ``live`` means it is here
            seen_at = max(t for t in (live.get(name), row.last_seen_at if row else None) if t is not None)
            agent = _agent_out(row, seen_at, now) if row else AgentOut(agent=name, last_seen=seen_at)
            agent.status = "active" if now - seen_at < IDLE_AFTER else "idle"
            agent.files = files.get(name, [])
            agent.tasks = tasks.get(name, [])
            agent.task = agent.tasks[0] if agent.tasks else None
            out.append(agent)
        out.sort(key=lambda a: (a.last_seen, a.agent), reverse=True)
        return out

    async def sessions(self, user_id: str) -> list[SessionSummary]:
        """The user's sessions that any agent has used: active ones first, then by last activity."""
        async with self.db.session() as db:
            rows = await repository.recent_agents(db, user_id, limit=SESSIONS_SCANNED)
        now = utcnow()
        grouped: dict[str, list[SessionAgent]] = defaultdict(list)
        for row in rows:
            if row.joined_at is not None or row.left_at is None or row.last_seen_at > row.left_at:
                grouped[row.session].append(row)
        summaries = [
            SessionSummary(
                session=name,
                agents=agents,
                last_activity=agents[0].last_seen_at,
                active=now - agents[0].last_seen_at < IDLE_AFTER,
            )
            for name, agents in grouped.items()
        ]
        summaries.sort(key=lambda s: (s.active, s.last_activity), reverse=True)
        return summaries


def _listed(row: SessionAgent, window: datetime) -> bool:
    """Joined, or seen within the window and not only before it left."""
    if row.joined_at is not None:
        return True
    return row.last_seen_at > window and (row.left_at is None or row.last_seen_at > row.left_at)


def _agent_out(row: SessionAgent, seen_at: datetime, now: datetime) -> AgentOut:
    joined = row.joined_at is not None
    return AgentOut(
        agent=row.agent,
        last_seen=seen_at,
        role=row.role if joined else None,
        capabilities=list(row.capabilities or []) if joined else [],
        client=row.client if joined else None,
        joined=joined,
        status="active" if now - seen_at < IDLE_AFTER else "idle",
    )
