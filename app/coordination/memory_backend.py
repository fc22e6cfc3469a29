"""Coordination held in this process: the same contract as Redis, for a single server instance.

Every mutation runs without an ``await`` in the middle, so each call is atomic on the event loop and needs no lock.
Expiry is computed when state is read, against the injectable millisecond clock.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter

from app.coordination import rules
from app.coordination.cursors import (
    MAX_PART,
    datetime_to_ms,
    fencing_token,
    format_cursor,
    ms_to_datetime,
    now_ms,
    parse_resume_cursor,
)
from app.coordination.events import change_event, claim_event, release_event
from app.coordination.lives import CountingLives, Lives
from app.coordination.models import (
    Change,
    ChangePage,
    Claim,
    ClaimConflict,
    ClaimResult,
    Event,
    Presence,
    ReleaseResult,
    SessionKey,
)
from app.errors import ValidationFailed

SUBSCRIBER_QUEUE = 1000


@dataclass(slots=True)
class _Held:
    agent: str
    operation: str
    token: int
    expires_ms: int


@dataclass(slots=True)
class _Session:
    # This process's life of the session: a restart begins another, with a greater number (see cursors).
    life: int
    held: dict[str, _Held] = field(default_factory=dict)
    fences: dict[str, int] = field(default_factory=dict)
    # (position, change) in feed order; position is the parsed cursor.
    feed: list[tuple[tuple[int, int], Change]] = field(default_factory=list)
    last_position: tuple[int, int] = (0, 0)
    seen: dict[str, int] = field(default_factory=dict)
    subscribers: set[asyncio.Queue[Event]] = field(default_factory=set)


class MemoryCoordination:
    """In-process coordination (single instance). ``clock`` returns epoch milliseconds."""

    name: str = "memory"

    def __init__(
        self,
        *,
        presence_ttl_seconds: float = rules.DEFAULT_PRESENCE_TTL_SECONDS,
        clock: Callable[[], int] = now_ms,
        lives: Lives | None = None,
    ) -> None:
        self._presence_ttl_ms = int(presence_ttl_seconds * 1000)
        self._clock = clock
        self._lives = lives or CountingLives()
        self._sessions: dict[SessionKey, _Session] = {}

    async def _session(self, key: SessionKey) -> _Session:
        rules.check_key(key)
        state = self._sessions.get(key)
        if state is None:
            # The only await of a call, before it changes anything: each call stays atomic on the event loop.
            life = await self._lives.next_life(key)
            state = self._sessions.setdefault(key, _Session(life))
        return state

    def _live(self, state: _Session, path: str, now: int) -> _Held | None:
        held = state.held.get(path)
        if held is not None and held.expires_ms <= now:
            del state.held[path]
            return None
        return held

    def _publish(self, state: _Session, event: Event) -> None:
        for queue in state.subscribers:
            # A subscriber that stopped reading loses events rather than holding up the writers.
            if not queue.full():
                queue.put_nowait(event)

    async def claim(
        self,
        key: SessionKey,
        agent: str,
        paths: Sequence[str],
        operation: str = "write",
        ttl_seconds: int = 1800,
        *,
        ttl_ms: int | None = None,
    ) -> ClaimResult:
        """Claim every path or none."""
        state = await self._session(key)
        rules.check_agent(agent)
        wanted = rules.normalise_paths(paths)
        operation = rules.check_operation(operation)
        ttl = rules.ttl_millis(ttl_seconds, ttl_ms)
        now = self._clock()
        self._seen(state, agent, now)
        conflicts = []
        for path in wanted:
            held = self._live(state, path, now)
            if held is not None and held.agent != agent:
                conflicts.append(ClaimConflict(path, held.agent, held.operation, ms_to_datetime(held.expires_ms)))
        if conflicts:
            return ClaimResult(granted=[], conflicts=conflicts)
        expires = now + ttl
        granted = []
        for path in wanted:
            count = state.fences.get(path, 0) + 1
            state.fences[path] = count
            token = fencing_token(state.life, count)
            state.held[path] = _Held(agent, operation, token, expires)
            granted.append(Claim(path, agent, operation, token, ms_to_datetime(expires)))
        self._publish(state, claim_event(agent, granted, ms_to_datetime(now)))
        return ClaimResult(granted=granted, conflicts=[])

    async def release(self, key: SessionKey, agent: str, paths: Sequence[str]) -> ReleaseResult:
        """Release what ``agent`` holds among ``paths``."""
        state = await self._session(key)
        rules.check_agent(agent)
        wanted = rules.normalise_paths(paths)
        now = self._clock()
        self._seen(state, agent, now)
        released: list[str] = []
        not_held: list[ClaimConflict | str] = []
        for path in wanted:
            held = self._live(state, path, now)
            if held is None:
                not_held.append(path)
            elif held.agent != agent:
                not_held.append(ClaimConflict(path, held.agent, held.operation, ms_to_datetime(held.expires_ms)))
            else:
                del state.held[path]
                released.append(path)
        if released:
            self._publish(state, release_event(agent, released, ms_to_datetime(now)))
        return ReleaseResult(released=released, not_held=not_held)

    async def claims(self, key: SessionKey) -> list[Claim]:
        """The unexpired claims, by path."""
        state = await self._session(key)
        now = self._clock()
        result = []
        for path in sorted(state.held):
            held = self._live(state, path, now)
            if held is not None:
                result.append(Claim(path, held.agent, held.operation, held.token, ms_to_datetime(held.expires_ms)))
        return result

    async def broadcast(self, key: SessionKey, agent: str, paths: Sequence[str], summary: str) -> Change:
        """Append a change to the feed and announce it."""
        state = await self._session(key)
        rules.check_agent(agent)
        files = rules.normalise_paths(paths, allow_empty=True)
        summary = rules.check_summary(summary)
        now = self._clock()
        self._seen(state, agent, now)
        last_ms, last_seq = state.last_position
        # Same rule as Redis stream ids: never go backwards, even if the clock does.
        position = (now, 0) if now > last_ms else (last_ms, last_seq + 1)
        state.last_position = position
        change = Change(format_cursor(state.life, *position), agent, files, summary, ms_to_datetime(position[0]))
        state.feed.append((position, change))
        if len(state.feed) > rules.FEED_MAX_ENTRIES:
            del state.feed[: len(state.feed) - rules.FEED_MAX_ENTRIES]
        self._publish(state, change_event(change))
        return change

    async def changes(
        self,
        key: SessionKey,
        *,
        since: str | None = None,
        since_time: datetime | None = None,
        exclude_agent: str | None = None,
        limit: int = 100,
    ) -> ChangePage:
        """Changes after ``since`` (exclusive) or at/after ``since_time``, oldest first."""
        state = await self._session(key)
        rules.check_limit(limit)
        if since is not None and since_time is not None:
            raise ValidationFailed("pass since or since_time, not both")
        if exclude_agent is not None:
            rules.check_agent(exclude_agent, "exclude_agent")
        reset = False
        if since is not None:
            life, *position = parse_resume_cursor(since)
            after = (position[0], position[1])
            if life != state.life:
                # The feed that cursor pointed into is gone (this process restarted): everything, and say so.
                reset, after = True, (0, 0)
        elif since_time is not None:
            ms = datetime_to_ms(since_time)
            after = (ms - 1, MAX_PART) if ms > 0 else (0, 0)
        else:
            after = (0, 0)
        cursor = since if since is not None and not reset else format_cursor(state.life, *after)
        start = bisect.bisect_right(state.feed, after, key=itemgetter(0))
        picked: list[Change] = []
        for position_, change in state.feed[start:]:
            if len(picked) == limit:
                break
            cursor = format_cursor(state.life, *position_)
            if change.agent != exclude_agent:
                picked.append(change)
        return ChangePage(changes=picked, cursor=cursor, reset=reset)

    async def touch(self, key: SessionKey, agent: str) -> None:
        """Record ``agent`` as present now."""
        state = await self._session(key)
        rules.check_agent(agent)
        self._seen(state, agent, self._clock())

    def _seen(self, state: _Session, agent: str, now: int) -> None:
        state.seen[agent] = now
        cutoff = now - self._presence_ttl_ms
        for name in [name for name, seen in state.seen.items() if seen <= cutoff]:
            del state.seen[name]

    async def presence(self, key: SessionKey) -> list[Presence]:
        """Agents seen within the presence TTL, most recent first."""
        state = await self._session(key)
        cutoff = self._clock() - self._presence_ttl_ms
        seen = sorted(((ms, agent) for agent, ms in state.seen.items() if ms > cutoff), reverse=True)
        return [Presence(agent, ms_to_datetime(ms)) for ms, agent in seen]

    async def forget(self, key: SessionKey, agent: str) -> None:
        """Drop ``agent`` from presence."""
        state = await self._session(key)
        rules.check_agent(agent)
        state.seen.pop(agent, None)

    async def publish(self, key: SessionKey, event: Event) -> None:
        """Announce ``event`` to the session's subscribers."""
        self._publish(await self._session(key), event)

    @asynccontextmanager
    async def subscribe(self, key: SessionKey) -> AsyncIterator[AsyncIterator[Event]]:
        """Live events of the session while the context is open."""
        state = await self._session(key)
        queue: asyncio.Queue[Event] = asyncio.Queue(SUBSCRIBER_QUEUE)
        state.subscribers.add(queue)
        try:
            yield _drain(queue)
        finally:
            state.subscribers.discard(queue)

    async def erase_user(self, user_id: str) -> int:
        """Drop every session state of ``user_id`` (an account deleted); the number of sessions dropped."""
        keys = [key for key in self._sessions if key.user_id == user_id]
        for key in keys:
            del self._sessions[key]
        return len(keys)

    async def ping(self) -> None:
        """Always answers: the state is in this process."""

    async def close(self) -> None:
        """Nothing to release."""


async def _drain(queue: asyncio.Queue[Event]) -> AsyncIterator[Event]:
    while True:
        yield await queue.get()
