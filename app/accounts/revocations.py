"""Revocations reach open streams at once: a revoked credential's SSE streams, MCP push and MCP sessions end.

A stream outlives the request that opened it, so it cannot rely on per-request authentication. Whoever revokes a
credential notes the user in the database session (``note_revoked``); once that transaction commits, the user is
announced, in this process and (with Redis) to every instance. Each open stream of that user then checks its own
credential at once and ends if it no longer holds. Announcing the user rather than the credential keeps this
simple where one act revokes many credentials (a key and the machine clients it registered): a stream whose
credential still holds just carries on. Streams also re-check on a timer (``stream_recheck_seconds``), which covers
expiry and a revocation announced where no Redis carries it (the CLI of an embedded install).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded only where Redis is configured: a CLI command on an embedded install never needs it
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

CHANNEL = "engram:revocations"
_NOTED = "engram.revoked_users"


def note_revoked(session: Any, user_id: str | None) -> None:
    """Record, in the session that revokes it, that a credential of ``user_id`` is being revoked.

    ``session`` is an AsyncSession or the synchronous Session authlib's hooks get (they share ``info``)."""
    if user_id:
        session.info.setdefault(_NOTED, set()).add(user_id)


def noted(info: dict[str, Any]) -> set[str]:
    """The users noted in a session's ``info`` (and forgets them: a session may commit more than once)."""
    users: set[str] = info.pop(_NOTED, set())
    return users


class Revocations:
    """Announces users whose credentials were revoked; streams watch their user."""

    def __init__(self, redis_url: str | None = None) -> None:
        self._redis: Redis | None = None
        if redis_url:
            from redis.asyncio import Redis

            self._redis = Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def watch(self, user_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever a credential of ``user_id`` is announced revoked, while the block runs."""
        event = asyncio.Event()
        self._watchers.setdefault(user_id, set()).add(event)
        try:
            yield event
        finally:
            watchers = self._watchers.get(user_id)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._watchers[user_id]

    def listen(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(user_id)`` for every announcement (e.g. to end MCP sessions of that user)."""
        self._listeners.append(listener)

    def _fire(self, user_id: str) -> None:
        for event in self._watchers.get(user_id, ()):
            event.set()
        for listener in self._listeners:
            try:
                listener(user_id)
            except Exception:
                log.exception("a revocation listener failed")

    async def announce(self, user_ids: set[str]) -> None:
        """Tell this process's streams at once, and the other instances through Redis when there is one."""
        for user_id in user_ids:
            self._fire(user_id)
        if self._redis is None or not user_ids:
            return
        from app.redis_breaker import UNAVAILABLE

        try:
            for user_id in user_ids:
                await self._redis.publish(CHANNEL, user_id)
        except UNAVAILABLE:
            # The other instances' streams fall back to their timed re-check.
            log.warning("could not announce a revocation through Redis", exc_info=True)

    async def after_commit(self, info: dict[str, Any]) -> None:
        """The database's after-commit hook: announce the users the committed transaction revoked for."""
        users = noted(info)
        if users:
            await self.announce(users)

    async def _follow(self) -> None:
        """Relay the other instances' announcements to this process's streams, reconnecting as needed."""
        assert self._redis is not None
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message is not None and message["type"] == "message":
                            data = message["data"]
                            self._fire(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("revocation relay lost Redis; retrying", exc_info=True)
                await asyncio.sleep(0.5)

    def start(self) -> None:
        if self._redis is not None and self._task is None:
            self._task = asyncio.create_task(self._follow(), name="revocation-relay")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._redis is not None:
            await self._redis.aclose()
