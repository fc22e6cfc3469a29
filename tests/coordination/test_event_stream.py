"""The SSE stream of a session's events when a client resumes from a cursor, over both backends."""

from __future__ import annotations

import json

import anyio
import pytest
from litestar.response import ServerSentEvent, ServerSentEventMessage

from app.coordination import Coordination, SessionKey
from app.coordination.cursors import START
from app.coordination.events import change_event
from app.sessions.service import Missed
from app.sessions.sse import event_stream

pytestmark = pytest.mark.anyio


async def summaries(response: ServerSentEvent, wanted: int) -> list[str]:
    """The summaries of the first ``wanted`` change events the stream sends; then the stream is closed."""
    messages = response.iterator.content_async_iterator  # type: ignore[attr-defined]
    got: list[str] = []
    try:
        with anyio.fail_after(30):
            async for message in messages:
                assert isinstance(message, ServerSentEventMessage)
                if message.event == "change":
                    assert isinstance(message.data, str)
                    got.append(json.loads(message.data)["data"]["summary"])
                    if len(got) == wanted:
                        return got
        raise AssertionError(f"the stream ended after {got}")
    finally:
        await messages.aclose()


async def test_a_change_made_while_the_backlog_is_read_is_sent_once(coord: Coordination, key: SessionKey) -> None:
    async def backlog(cursor: str) -> Missed:
        # Lands after the stream subscribed and before it reads the feed: it is in the backlog and on the live channel.
        await coord.broadcast(key, "alice", [], "raced")
        page = await coord.changes(key, since=cursor)
        return Missed([change_event(c) for c in page.changes], page.reset, page.cursor)

    await coord.broadcast(key, "alice", [], "missed")
    stream = await event_stream(coord.subscribe(key), key.session, resume_from=START, backlog=backlog)
    await coord.broadcast(key, "alice", [], "live")
    assert await summaries(stream, 3) == ["missed", "raced", "live"]
