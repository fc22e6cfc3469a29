"""A session's live events as Server-Sent Events, for the REST stream and the dashboard alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from litestar.response import ServerSentEvent, ServerSentEventMessage

from app.coordination import Event
from app.coordination.cursors import parse_cursor

KEEPALIVE_SECONDS = 15


def full_event(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, "agent": event.agent, "at": event.at.isoformat(), "data": event.data}


async def event_stream(
    subscription: AbstractAsyncContextManager[AsyncIterator[Event]],
    session: str,
    payload: Callable[[Event], dict[str, Any]] = full_event,
    headers: dict[str, str] | None = None,
    resume_from: str | None = None,
    backlog: Callable[[str], Awaitable[list[Event]]] | None = None,
    still_allowed: Callable[[], Awaitable[bool]] | None = None,
) -> ServerSentEvent:
    """Enter the subscription now, so that an unreachable store fails the request instead of the stream.

    Change events carry their feed cursor as the SSE id. With ``resume_from`` (the cursor a reconnecting client last
    saw), ``backlog(resume_from)`` is read once subscribed and sent first, and no live change at or before what was
    sent goes out again: a client that reconnects with ``Last-Event-ID`` misses no change and sees none twice.
    """
    sent = parse_cursor(resume_from) if resume_from is not None else (0, 0)
    events = await subscription.__aenter__()
    try:
        missed = await backlog(resume_from) if backlog is not None and resume_from is not None else []
    except BaseException:
        await subscription.__aexit__(None, None, None)
        raise

    def message(event: Event) -> ServerSentEventMessage:
        cursor = event.data.get("cursor") if event.kind == "change" else None
        return ServerSentEventMessage(event=event.kind, data=json.dumps(payload(event), default=str), id=cursor)

    async def stream() -> AsyncGenerator[ServerSentEventMessage, None]:
        # A pump feeds a queue so that waiting with a timeout never cancels the subscription itself.
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in events:
                    queue.put_nowait(event)
            finally:
                queue.put_nowait(None)

        nonlocal sent
        pumping = asyncio.create_task(pump())
        try:
            yield ServerSentEventMessage(event="ready", data=json.dumps({"session": session}))
            for change in missed:
                sent = parse_cursor(change.data["cursor"])
                yield message(change)
            while True:
                try:
                    event: Event | None = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    idle = False
                except TimeoutError:
                    event, idle = None, True
                if still_allowed is not None and not await still_allowed():
                    message_text = "the credential that opened this stream was revoked or has expired"
                    yield ServerSentEventMessage(event="revoked", data=json.dumps({"message": message_text}))
                    return
                if idle:
                    # A comment line keeps proxies from closing an idle stream and reveals a departed client.
                    yield ServerSentEventMessage(comment="keepalive")
                    continue
                if event is None:
                    return
                if event.kind == "change" and parse_cursor(event.data["cursor"]) <= sent:
                    continue  # already sent from the backlog
                yield message(event)
        finally:
            pumping.cancel()
            await subscription.__aexit__(None, None, None)

    return ServerSentEvent(stream(), headers=headers)
