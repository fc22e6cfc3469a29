"""Revocations reach open streams at once: a revoked credential's SSE streams, MCP push and MCP sessions end.

A stream outlives the request that opened it, so it cannot rely on per-request authentication. Whoever revokes a
credential notes the user in the database session (``note_revoked``); once that transaction commits, the user is
announced, in this process and (with Redis) to every instance. Each open stream of that user then checks its own
credential at once and ends if it no longer holds. Announcing the user rather than the credential keeps this
simple where one act revokes many credentials (a key and the machine clients it registered): a stream whose
credential still holds just carries on. Streams also re-check on a timer (``stream_recheck_seconds``), which covers
expiry.

The revoking transaction also writes a ``credential_revocations`` row, and every server polls that table (one indexed
read per ``revocation_poll_seconds`` per process, however many streams are open): that is how a revocation made in
another process reaches the streams where no Redis carries it (the CLI of an embedded install, or Redis down).

Deleting an account revokes every credential of it, but an erased user must not be named in the database afterwards,
even for the day such a row is kept: its row holds ``erasure_mark(user_id)``, a digest, and each process matches it
against the users of its own open streams (``concerns``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.accounts.models import CredentialRevocation
from app.db import Database
from app.task_stopping import cancel_and_wait

if TYPE_CHECKING:  # loaded only where Redis is configured: a CLI command on an embedded install never needs it
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

CHANNEL = "engram:revocations"
_NOTED = "engram.revoked_users"
# Row ids come from a sequence, and on PostgreSQL a transaction may commit after one that took a later id: an id
# skipped over is looked for again this long before the poll gives up on it (rolled back, most likely).
GAP_SECONDS = 10.0
_MAX_GAPS = 1000
_POLL_BATCH = 1000


ERASED = "erased:"


def erasure_mark(user_id: str) -> str:
    """What announces a deleted account's revocation in its place: a digest of its id, which names nobody."""
    return ERASED + hashlib.blake2b(user_id.encode(), digest_size=16).hexdigest()


def concerns(announced: str, user_id: str) -> bool:
    """Whether an announcement (a user id, or an erased account's mark) is about ``user_id``."""
    return announced == user_id or (announced.startswith(ERASED) and announced == erasure_mark(user_id))


def note_erased(session: Any, user_id: str) -> None:
    """Record, in the session that deletes the account, that all of ``user_id``'s credentials are going: the row
    other processes poll holds the account's mark, not its id."""
    session.add(CredentialRevocation(user_id=erasure_mark(user_id)))


def note_revoked(session: Any, user_id: str | None) -> None:
    """Record, in the session that revokes it, that a credential of ``user_id`` is being revoked.

    ``session`` is an AsyncSession or the synchronous Session authlib's hooks get (they share ``info``)."""
    if not user_id:
        return
    session.info.setdefault(_NOTED, set()).add(user_id)
    pending = any(isinstance(row, CredentialRevocation) and row.user_id == user_id for row in session.new)
    if not pending:
        session.add(CredentialRevocation(user_id=user_id))


def noted(info: dict[str, Any]) -> set[str]:
    """The users noted in a session's ``info`` (and forgets them: a session may commit more than once)."""
    users: set[str] = info.pop(_NOTED, set())
    return users


async def purge(conn: AsyncConnection, before: datetime) -> int:
    """Delete the revocation rows written before ``before`` (every poll has read them long since)."""
    result = await conn.execute(delete(CredentialRevocation).where(CredentialRevocation.revoked_at < before))
    return int(result.rowcount or 0)


class RevocationCursor:
    """Which revocation rows the poll has seen: every id up to ``floor``, and those in ``seen`` above it."""

    def __init__(self, floor: int) -> None:
        self.floor = floor
        self.seen: set[int] = set()
        self.gaps: dict[int, float] = {}  # an id skipped over -> when the poll first noticed it missing

    def take(self, ids: list[int], now: float) -> list[int]:
        """Of the ids read above ``floor``, those not seen before; then move ``floor`` up past every id seen or
        missing for longer than GAP_SECONDS."""
        new = [i for i in ids if i > self.floor and i not in self.seen]
        self.seen.update(new)
        for i in new:
            self.gaps.pop(i, None)
        top = max(self.seen, default=self.floor)
        if top - self.floor - len(self.seen) > _MAX_GAPS:
            self.gaps.clear()  # a sequence that jumped (PostgreSQL caches ids): nothing is coming back for those
        else:
            for i in range(self.floor + 1, top):
                if i not in self.seen:
                    self.gaps.setdefault(i, now)
        self.gaps = {i: since for i, since in self.gaps.items() if now - since < GAP_SECONDS}
        self.floor = min(self.gaps) - 1 if self.gaps else top
        self.seen = {i for i in self.seen if i > self.floor}
        return new


class Revocations:
    """Announces users whose credentials were revoked; streams watch their user."""

    def __init__(self, redis_url: str | None = None, db: Database | None = None, *, poll_seconds: float = 0.5) -> None:
        """``db``: poll it for revocations made by other processes (a server passes it; the CLI does not)."""
        self._redis: Redis | None = None
        if redis_url:
            from redis.asyncio import Redis

            self._redis = Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        self._db = db
        self._poll_seconds = poll_seconds
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._poll: asyncio.Task[None] | None = None

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
        """Call ``listener(announced)`` for every announcement (e.g. to end MCP sessions of that user): a user id, or
        an erased account's mark (``concerns`` tells whether it is about a given user)."""
        self._listeners.append(listener)

    def _fire(self, announced: str) -> None:
        """Wake the streams of the user ``announced`` names (by id, or by an erased account's mark)."""
        if announced.startswith(ERASED):
            users = [user for user in self._watchers if concerns(announced, user)]
        else:
            users = [announced]
        for user in users:
            for event in self._watchers.get(user, ()):
                event.set()
        for listener in self._listeners:
            try:
                listener(announced)
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

    async def _read_since(self, floor: int) -> list[tuple[int, str]]:
        assert self._db is not None
        query = (
            select(CredentialRevocation.id, CredentialRevocation.user_id)
            .where(CredentialRevocation.id > floor)
            .order_by(CredentialRevocation.id)
            .limit(_POLL_BATCH)
        )
        async with self._db.engine.connect() as conn:
            return [(row[0], row[1]) for row in await conn.execute(query)]

    async def _follow_database(self) -> None:
        """Fire for every revocation row committed since this server started, wherever it was written."""
        assert self._db is not None
        cursor: RevocationCursor | None = None
        commits = self._db.commits.watch()  # nothing committed since the last look: no revocation either
        while True:
            try:
                if cursor is None:
                    async with self._db.engine.connect() as conn:
                        top = (await conn.execute(select(func.max(CredentialRevocation.id)))).scalar()
                    cursor = RevocationCursor(int(top or 0))
                if commits.moved():
                    rows = await self._read_since(cursor.floor)
                    users = dict(rows)
                    for row_id in cursor.take(list(users), time.monotonic()):
                        self._fire(users[row_id])
                    commits.seen()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("could not poll the database for revocations; retrying", exc_info=True)
            await asyncio.sleep(self._poll_seconds)

    def start(self) -> None:
        if self._redis is not None and self._task is None:
            self._task = asyncio.create_task(self._follow(), name="revocation-relay")
        if self._db is not None and self._poll is None:
            self._poll = asyncio.create_task(self._follow_database(), name="revocation-poll")

    async def close(self) -> None:
        for task in (self._task, self._poll):
            if task is not None:
                await cancel_and_wait(task)
        self._task = self._poll = None
        if self._redis is not None:
            await self._redis.aclose()
