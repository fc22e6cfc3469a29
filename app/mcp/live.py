"""The open MCP sessions of this server: who created each (it may only be used the same way), and live push.

Push: while an MCP session of a session agent is open, a task follows the session's coordination events and sends
every other agent's claim, release and change to the client as a ``notifications/message`` log notification
(logger ``engram.session``, level ``info``, the event in ``data``) on the session's standalone GET stream. The
official SDK hands those to a client's ``logging_callback`` and ``message_handler``. Clients of the stateless
2026-07-28 revision get the same events through ``subscriptions/listen`` (``app.mcp.listen``); a client with
neither stream sees the same changes through ``session_sync_changes``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import anyio.abc
import mcp.types as types
from mcp.server.session import ServerSession

from app.accounts.auth import Recheck
from app.coordination import Event
from app.errors import ServiceUnavailable
from app.identity import Identity
from app.sessions.service import SessionService

log = logging.getLogger(__name__)

PUSH_LOGGER = "engram.session"
PUSH_LEVEL: types.LoggingLevel = "info"
_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)
_MAX_RETRY_SECONDS = 30.0


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

    def __init__(self) -> None:
        self._sessions: dict[str, _Live] = {}
        self._tasks: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    def __len__(self) -> int:
        return len(self._sessions)

    def bind(self, session_id: str, owner: Owner, identity: Identity) -> None:
        self._sessions[session_id] = _Live(owner, identity)

    def owner(self, session_id: str) -> Owner | None:
        live = self._sessions.get(session_id)
        return live.owner if live else None

    def discard(self, session_id: str) -> None:
        live = self._sessions.pop(session_id, None)
        if live is not None and live.pump is not None:
            live.pump.cancel()

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
        delay = 0.5
        with live.pump:
            while True:
                try:
                    async with sessions.events(live.identity) as events:
                        async for event in events:
                            delay = 0.5
                            if event.agent == live.identity.agent or not _allowed(live.log_level):
                                continue
                            if recheck is not None and not await recheck.holds():
                                log.info("live push for %s stopped: its credential was revoked", live.identity.format())
                                return
                            await sender.send_notification(_notification(live.identity, event))
                except ServiceUnavailable as exc:
                    log.warning("live push for %s paused: %s", live.identity.format(), exc.message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the MCP session is gone
                except Exception:
                    log.exception("live push for %s failed; retrying", live.identity.format())
                # The subscription ended or failed: follow again after a pause that grows while it keeps failing.
                await anyio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_SECONDS)


def _allowed(minimum: str) -> bool:
    return _LEVELS.index(PUSH_LEVEL) >= _LEVELS.index(minimum) if minimum in _LEVELS else True


def _notification(identity: Identity, event: Event) -> types.LoggingMessageNotification:
    return types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(
            level=PUSH_LEVEL, logger=PUSH_LOGGER, data=push_payload(identity, event)
        )
    )
