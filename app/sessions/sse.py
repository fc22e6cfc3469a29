"""A session's live events as Server-Sent Events, for the REST stream and the dashboard alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from litestar.response import ServerSentEvent, ServerSentEventMessage

from app.coordination import Event

KEEPALIVE_SECONDS = 15


def full_event(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, "agent": event.agent, "at": event.at.isoformat(), "data": event.data}


async def event_stream(
    subscription: AbstractAsyncContextManager[AsyncIterator[Event]],
    session: str,
    payload: Callable[[Event], dict[str, Any]] = full_event,
    headers: dict[str, str] | None = None,
) -> ServerSentEvent:
    """Enter the subscription now, so that an unreachable store fails the request instead of the stream."""
    events = await subscription.__aenter__()

    async def stream() -> AsyncGenerator[ServerSentEventMessage, None]:
        # A pump feeds a queue so that waiting with a timeout never cancels the subscription itself.
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in events:
                    queue.put_nowait(event)
            finally:
                queue.put_nowait(None)

        pumping = asyncio.create_task(pump())
        try:
            yield ServerSentEventMessage(event="ready", data=json.dumps({"session": session}))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    # A comment line keeps proxies from closing an idle stream and reveals a departed client.
                    yield ServerSentEventMessage(comment="keepalive")
                    continue
                if event is None:
                    return
                yield ServerSentEventMessage(event=event.kind, data=json.dumps(payload(event), default=str))
        finally:
            pumping.cancel()
            await subscription.__aexit__(None, None, None)

    return ServerSentEvent(stream(), headers=headers)
