"""The open MCP sessions of this server: who created each (it may only be used the same way), and live push.

Push: while an MCP session of a session agent is open, a task follows the session's coordination events and sends
every other agent's claim, release and change, every task and registry event, and each message addressed to this
agent (or its role, or everyone) to the client as a ``notifications/message`` log notification
(logger ``engram.session``, level ``info``, the event in ``data``) on the session's standalone GET stream. The
official SDK hands those to a client's ``logging_callback`` and ``message_handler``. Clients of the stateless
2026-07-28 revision get the same events through ``subscriptions/listen`` (``app.mcp.listen``); a client with
neither stream sees the same changes through ``session_sync_changes``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import anyio.abc
import mcp.types as types
from mcp.server.session import ServerSession

from app.accounts.auth import Authenticator, Recheck
from app.accounts.principal import Principal
from app.accounts.revocations import concerns
from app.coordination import Event
from app.coordination.cursors import parse_cursor
from app.db import utcnow
from app.errors import ServiceUnavailable
from app.identity import Identity
from app.sessions.service import RESET_MESSAGE, SessionService
from app.teams.events import visible_to

log = logging.getLogger(__name__)

PUSH_LOGGER = "engram.session"
PUSH_LEVEL: types.LoggingLevel = "info"
_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)
_RETRY_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class Owner:
    """What must match for a request to use an MCP session: the credential and the URL that created it."""

    user_id: str
    key_id: str | None
    via: str
    client_name: str
    raw_user_id: str


@dataclass
class _Live:
    owner: Owner
    identity: Identity
    log_level: str = "debug"
    pump: anyio.CancelScope | None = field(default=None)
    principal: Principal | None = None
    last_active: float = field(default_factory=time.monotonic)


def push_payload(identity: Identity, event: Event) -> dict[str, Any]:
    """The ``data`` of a pushed event."""
    return {
        "type": "engram.session_event",
        "session": identity.session,
        "kind": event.kind,
        "agent": event.agent,
        "at": event.at.isoformat(),
        "data": event.data,
    }


class LiveSessions:
    """Bindings and push tasks by MCP session id. Entries go when the SDK discards the session, however it ends."""

    def __init__(self, per_user: int = 32) -> None:
        self._per_user = per_user
        self._sessions: dict[str, _Live] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._authenticator: Authenticator | None = None
        self._terminate: Callable[[str], Coroutine[Any, Any, None]] | None = None

    @asynccontextmanager
    async def running(
        self, authenticator: Authenticator, terminate: Callable[[str], Coroutine[Any, Any, None]]
    ) -> AsyncIterator[None]:
        """``terminate(session_id)`` ends an MCP session (its streams close, its id is forgotten)."""
        self._authenticator, self._terminate = authenticator, terminate
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    def __len__(self) -> int:
        return len(self._sessions)

    def bind(self, session_id: str, owner: Owner, identity: Identity, principal: Principal | None = None) -> None:
        """Record a new session; beyond the user's cap, end that user's least recently used sessions."""
        self._sessions[session_id] = _Live(owner, identity, principal=principal)
        mine = [(live.last_active, sid) for sid, live in self._sessions.items() if live.owner.user_id == owner.user_id]
        if len(mine) > self._per_user and self._tasks is not None and self._terminate is not None:
            for _, sid in sorted(mine)[: len(mine) - self._per_user]:
                log.info("MCP session %s ended: its user opened more than %d", sid[:8], self._per_user)
                self._tasks.start_soon(self._terminate, sid, name="mcp-evict")

    def touch(self, session_id: str) -> None:
        """A request used the session now."""
        live = self._sessions.get(session_id)
        if live is not None:
            live.last_active = time.monotonic()

    def owner(self, session_id: str) -> Owner | None:
        live = self._sessions.get(session_id)
        return live.owner if live else None

    def discard(self, session_id: str) -> None:
        live = self._sessions.pop(session_id, None)
        if live is not None and live.pump is not None:
            live.pump.cancel()

    def credential_revoked(self, user_id: str) -> None:
        """A credential of ``user_id`` was revoked: end, at once, every MCP session whose credential no longer holds
        (its GET stream closes; the client's next request finds the session gone and must authenticate again)."""
        mine = [(sid, live.principal) for sid, live in self._sessions.items() if concerns(user_id, live.owner.user_id)]
        if mine and self._tasks is not None:
            self._tasks.start_soon(self._end_revoked, mine, name="mcp-revocation")

    async def _end_revoked(self, sessions: list[tuple[str, Principal | None]]) -> None:
        assert self._authenticator is not None and self._terminate is not None
        for session_id, principal in sessions:
            if principal is not None and not await self._authenticator.still_valid(principal):
                log.info("MCP session %s ended: its credential was revoked", session_id[:8])
                await self._terminate(session_id)

    def set_log_level(self, session_id: str, level: str) -> None:
        live = self._sessions.get(session_id)
        if live is not None:
            live.log_level = level

    def start_push(
        self, session_id: str, sessions: SessionService, sender: ServerSession, recheck: Recheck | None = None
    ) -> None:
        """Start pushing the other agents' events to this MCP session (once; only for session agents).

        ``recheck`` is asked before each push: once the session's credential is revoked or expired, pushing stops."""
        live = self._sessions.get(session_id)
        if live is None or live.pump is not None or not live.identity.is_session or self._tasks is None:
            return
        live.pump = anyio.CancelScope()
        self._tasks.start_soon(self._pump, live, sessions, sender, recheck, name=f"mcp-push-{session_id[:8]}")

    async def _pump(
        self, live: _Live, sessions: SessionService, sender: ServerSession, recheck: Recheck | None
    ) -> None:
        assert live.pump is not None
        # The last change pushed: after a lost subscription, what the feed holds beyond it is pushed first.
        cursor: str | None = None
        started = utcnow()
        with live.pump:
            while True:
                try:
                    async with sessions.events(live.identity) as events:
                        # Subscribed first, then read: a change lands in the backlog, live, or both (sent once).
                        missed = await sessions.missed_changes(live.identity, cursor, since_time=started)
                        if cursor is not None and missed.reset:
                            await sender.send_notification(_reset_notification(live.identity, missed.cursor))
                        cursor = missed.cursor
                        for event in missed.events:
                            if not await self._push(live, sender, recheck, event):
                                return
                        async for event in events:
                            if event.kind == "change":
                                if cursor is not None and parse_cursor(event.data["cursor"]) <= parse_cursor(cursor):
                                    continue  # pushed from the backlog already
                                cursor = event.data["cursor"]
                            if not await self._push(live, sender, recheck, event):
                                return
                except ServiceUnavailable as exc:
                    log.warning("live push for %s paused: %s", live.identity.format(), exc.message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the MCP session is gone
                except Exception:
                    log.exception("live push for %s failed; retrying", live.identity.format())
                # Retrying is cheap (while Redis's breaker is open a subscription fails without touching it), and it
                # is what makes push resume within a second of Redis answering again.
                await anyio.sleep(_RETRY_SECONDS)

    async def _push(self, live: _Live, sender: ServerSession, recheck: Recheck | None, event: Event) -> bool:
        """Send one event of another agent; False once the credential no longer holds (pushing must stop)."""
        if event.agent == live.identity.agent or not _allowed(live.log_level):
            return True
        if not visible_to(event, live.identity.agent):
            return True  # a message to others
        if recheck is not None and not await recheck.holds():
            log.info("live push for %s stopped: its credential was revoked", live.identity.format())
            return False
        await sender.send_notification(_notification(live.identity, event))
        return True


def _allowed(minimum: str) -> bool:
    return _LEVELS.index(PUSH_LEVEL) >= _LEVELS.index(minimum) if minimum in _LEVELS else True


def _reset_notification(identity: Identity, cursor: str) -> types.LoggingMessageNotification:
    data = {
        "type": "engram.session_event",
        "session": identity.session,
        "kind": "reset",
        "data": {"message": RESET_MESSAGE, "cursor": cursor},
    }
    return types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(level="warning", logger=PUSH_LOGGER, data=data)
    )


def _notification(identity: Identity, event: Event) -> types.LoggingMessageNotification:
    return types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(
            level=PUSH_LEVEL, logger=PUSH_LOGGER, data=push_payload(identity, event)
        )
    )
