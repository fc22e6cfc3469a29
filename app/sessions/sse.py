"""A session's live events as Server-Sent Events, for the REST stream and the dashboard alike."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

from litestar.response import ServerSentEvent, ServerSentEventMessage

from app.coordination import Event
from app.coordination.cursors import parse_cursor
from app.sessions.service import RESET_MESSAGE, Missed

KEEPALIVE_SECONDS = 15
# Put on a stream's queue when a revocation of its user is announced: check the credential now.
RECHECK = object()


def full_event(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, "agent": event.agent, "at": event.at.isoformat(), "data": event.data}


async def event_stream(
    subscription: AbstractAsyncContextManager[AsyncIterator[Event]],
    session: str,
    payload: Callable[[Event], dict[str, Any]] = full_event,
    headers: dict[str, str] | None = None,
    resume_from: str | None = None,
    backlog: Callable[[str], Awaitable[Missed]] | None = None,
    still_allowed: Callable[..., Awaitable[bool]] | None = None,
    revocations: AbstractContextManager[asyncio.Event] | None = None,
    keep: Callable[[Event], bool] | None = None,
    slot: AbstractContextManager[None] | None = None,
) -> ServerSentEvent:
    """Enter the subscription now, so that an unreachable store fails the request instead of the stream.

    Change events carry their feed cursor as the SSE id. With ``resume_from`` (the cursor a reconnecting client last
    saw), ``backlog(resume_from)`` is read once subscribed and sent first, and no live change at or before what was
    sent goes out again: a client that reconnects with ``Last-Event-ID`` misses no change and sees none twice.

    ``still_allowed(now=...)`` is asked at every event and keepalive, and at once whenever ``revocations`` (the
    watch of this user's revocations) fires: a revoked credential's stream ends within moments with a ``revoked``
    event. ``keep(event)``, when given, decides which live events this stream carries. ``slot`` (one of the user's
    open streams, ``OpenStreams.hold``) is taken first, refusing the request when the user holds too many, and held
    until the stream ends.
    """
    sent = parse_cursor(resume_from) if resume_from is not None else (0, 0, 0)
    release = _taken(slot)
    try:
        events = await subscription.__aenter__()
    except BaseException:
        release()
        raise
    try:
        missed = await backlog(resume_from) if backlog is not None and resume_from is not None else None
    except BaseException:
        await subscription.__aexit__(None, None, None)
        release()
        raise

    def message(event: Event) -> ServerSentEventMessage:
        cursor = event.data.get("cursor") if event.kind == "change" else None
        return ServerSentEventMessage(event=event.kind, data=json.dumps(payload(event), default=str), id=cursor)

    async def stream() -> AsyncGenerator[ServerSentEventMessage, None]:
        # A pump feeds a queue so that waiting with a timeout never cancels the subscription itself.
        queue: asyncio.Queue[Event | object | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in events:
                    queue.put_nowait(event)
            finally:
                queue.put_nowait(None)

        async def watch(revoked: asyncio.Event) -> None:
            while True:
                await revoked.wait()
                revoked.clear()
                queue.put_nowait(RECHECK)

        nonlocal sent
        pumping = asyncio.create_task(pump())
        watching = asyncio.create_task(watch(revocations.__enter__())) if revocations is not None else None
        try:
            yield ServerSentEventMessage(event="ready", data=json.dumps({"session": session}))
            if missed is not None and missed.reset:
                # Said before the new feed's changes, so a client knows to re-read what it caches (status, memories).
                reset = {"message": RESET_MESSAGE, "cursor": missed.cursor}
                yield ServerSentEventMessage(event="reset", data=json.dumps(reset))
            for change in missed.events if missed is not None else []:
                sent = parse_cursor(change.data["cursor"])
                yield message(change)
            while True:
                try:
                    item: Event | object | None = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    idle = False
                except TimeoutError:
                    item, idle = None, True
                if still_allowed is not None and not await still_allowed(now=item is RECHECK):
                    message_text = "the credential that opened this stream was revoked or has expired"
                    yield ServerSentEventMessage(event="revoked", data=json.dumps({"message": message_text}))
                    return
                if idle:
                    # A comment line keeps proxies from closing an idle stream and reveals a departed client.
                    yield ServerSentEventMessage(comment="keepalive")
                    continue
                if item is RECHECK:
                    continue  # the credential still holds
                if not isinstance(item, Event):
                    return
                event = item
                if event.kind == "change" and parse_cursor(event.data["cursor"]) <= sent:
                    continue  # already sent from the backlog
                if keep is not None and not keep(event):
                    continue
                yield message(event)
        finally:
            pumping.cancel()
            if watching is not None and revocations is not None:
                watching.cancel()
                revocations.__exit__(None, None, None)
            try:
                await subscription.__aexit__(None, None, None)
            finally:
                release()

    generator = stream()
    # A response whose client left before it started never runs the generator's ``finally``: the slot is given back
    # when the generator is collected instead.
    weakref.finalize(generator, release)
    return ServerSentEvent(generator, headers=headers)


def _taken(slot: AbstractContextManager[None] | None) -> Callable[[], None]:
    """Enter ``slot`` now; returns what gives it back, once however often it is called."""
    if slot is None:
        return lambda: None
    slot.__enter__()
    given_back = False

    def release() -> None:
        nonlocal given_back
        if not given_back:
            given_back = True
            slot.__exit__(None, None, None)

    return release
