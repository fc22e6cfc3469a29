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
    START,
    cursor_before,
    datetime_to_ms,
    format_cursor,
    ms_to_datetime,
    now_ms,
    parse_cursor,
    parse_resume_cursor,
)
from app.coordination.events import change_event, claim_event, release_event
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
    ) -> None:
        self._presence_ttl_ms = int(presence_ttl_seconds * 1000)
        self._clock = clock
        self._sessions: dict[SessionKey, _Session] = {}

    def _session(self, key: SessionKey) -> _Session:
        rules.check_key(key)
        state = self._sessions.get(key)
        if state is None:
            state = self._sessions[key] = _Session()
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
        state = self._session(key)
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
            token = state.fences.get(path, 0) + 1
            state.fences[path] = token
            state.held[path] = _Held(agent, operation, token, expires)
            granted.append(Claim(path, agent, operation, token, ms_to_datetime(expires)))
        self._publish(state, claim_event(agent, granted, ms_to_datetime(now)))
        return ClaimResult(granted=granted, conflicts=[])

    async def release(self, key: SessionKey, agent: str, paths: Sequence[str]) -> ReleaseResult:
        """Release what ``agent`` holds among ``paths``."""
        state = self._session(key)
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
        state = self._session(key)
        now = self._clock()
        result = []
        for path in sorted(state.held):
            held = self._live(state, path, now)
            if held is not None:
                result.append(Claim(path, held.agent, held.operation, held.token, ms_to_datetime(held.expires_ms)))
        return result

    async def broadcast(self, key: SessionKey, agent: str, paths: Sequence[str], summary: str) -> Change:
        """Append a change to the feed and announce it."""
        state = self._session(key)
        rules.check_agent(agent)
        files = rules.normalise_paths(paths, allow_empty=True)
        summary = rules.check_summary(summary)
        now = self._clock()
        self._seen(state, agent, now)
        last_ms, last_seq = state.last_position
        # Same rule as Redis stream ids: never go backwards, even if the clock does.
        position = (now, 0) if now > last_ms else (last_ms, last_seq + 1)
        state.last_position = position
        change = Change(format_cursor(*position), agent, files, summary, ms_to_datetime(position[0]))
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
        state = self._session(key)
        rules.check_limit(limit)
        if since is not None and since_time is not None:
            raise ValidationFailed("pass since or since_time, not both")
        if exclude_agent is not None:
            rules.check_agent(exclude_agent, "exclude_agent")
        if since is not None:
            after = parse_resume_cursor(since)
            cursor = since
        elif since_time is not None:
            cursor = cursor_before(datetime_to_ms(since_time))
            after = parse_cursor(cursor)
        else:
            after, cursor = (0, 0), START
        start = bisect.bisect_right(state.feed, after, key=itemgetter(0))
        picked: list[Change] = []
        for position, change in state.feed[start:]:
            if len(picked) == limit:
                break
            cursor = format_cursor(*position)
            if change.agent != exclude_agent:
                picked.append(change)
        return ChangePage(changes=picked, cursor=cursor)

    async def touch(self, key: SessionKey, agent: str) -> None:
        """Record ``agent`` as present now."""
        state = self._session(key)
        rules.check_agent(agent)
        self._seen(state, agent, self._clock())

    def _seen(self, state: _Session, agent: str, now: int) -> None:
        state.seen[agent] = now
        cutoff = now - self._presence_ttl_ms
        for name in [name for name, seen in state.seen.items() if seen <= cutoff]:
            del state.seen[name]

    async def presence(self, key: SessionKey) -> list[Presence]:
        """Agents seen within the presence TTL, most recent first."""
        state = self._session(key)
        cutoff = self._clock() - self._presence_ttl_ms
        seen = sorted(((ms, agent) for agent, ms in state.seen.items() if ms > cutoff), reverse=True)
        return [Presence(agent, ms_to_datetime(ms)) for ms, agent in seen]

    @asynccontextmanager
    async def subscribe(self, key: SessionKey) -> AsyncIterator[AsyncIterator[Event]]:
        """Live events of the session while the context is open."""
        state = self._session(key)
        queue: asyncio.Queue[Event] = asyncio.Queue(SUBSCRIBER_QUEUE)
        state.subscribers.add(queue)
        try:
            yield _drain(queue)
        finally:
            state.subscribers.discard(queue)

    async def ping(self) -> None:
        """Always answers: the state is in this process."""

    async def close(self) -> None:
        """Nothing to release."""


async def _drain(queue: asyncio.Queue[Event]) -> AsyncIterator[Event]:
    while True:
        yield await queue.get()
