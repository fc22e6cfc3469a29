"""The one contract both coordination backends (Redis, in-process) implement."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from app.coordination.models import Change, ChangePage, Claim, ClaimResult, Event, Presence, ReleaseResult, SessionKey


class Coordination(Protocol):
    """Claims, change feed, presence and live events of the agents sharing a session.

    Claims conflict whatever their ``operation``: it is a label shown to other agents, not a lock mode.
    An agent that claims, releases or broadcasts is present from then on, as if it had called ``touch``.
    Bad input raises ``ValidationFailed``; an unreachable store raises ``CoordinationUnavailable``.
    """

    name: str

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
        """Claim every path or none. ``ttl_ms`` (tests, internal callers) overrides ``ttl_seconds``."""
        ...

    async def release(self, key: SessionKey, agent: str, paths: Sequence[str]) -> ReleaseResult:
        """Release the paths ``agent`` holds; others are reported in ``not_held``."""
        ...

    async def claims(self, key: SessionKey) -> list[Claim]:
        """The unexpired claims of the session, by path."""
        ...

    async def broadcast(self, key: SessionKey, agent: str, paths: Sequence[str], summary: str) -> Change:
        """Append a change to the session's feed and announce it."""
        ...

    async def changes(
        self,
        key: SessionKey,
        *,
        since: str | None = None,
        since_time: datetime | None = None,
        exclude_agent: str | None = None,
        limit: int = 100,
    ) -> ChangePage:
        """Changes after cursor ``since`` (exclusive) or at/after ``since_time``, oldest first."""
        ...

    async def touch(self, key: SessionKey, agent: str) -> None:
        """Record that ``agent`` is present now."""
        ...

    async def presence(self, key: SessionKey) -> list[Presence]:
        """Agents seen within the presence TTL, most recent first."""
        ...

    async def forget(self, key: SessionKey, agent: str) -> None:
        """Drop ``agent`` from presence (it left the session); its next action marks it present again."""
        ...

    async def publish(self, key: SessionKey, event: Event) -> None:
        """Announce an event recorded elsewhere (a message, a task) to the session's subscribers; best effort."""
        ...

    def subscribe(self, key: SessionKey) -> AbstractAsyncContextManager[AsyncIterator[Event]]:
        """Live events of the session from the moment the context is entered."""
        ...

    async def erase_user(self, user_id: str) -> int:
        """Drop all coordination state of every session of ``user_id`` (the account is deleted)."""
        ...

    async def ping(self) -> None:
        """Raise ``CoordinationUnavailable`` unless the store answers."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
