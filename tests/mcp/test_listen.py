"""Live push for the stateless 2026-07-28 revision: session resources and ``subscriptions/listen``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp.types import TextResourceContents

from tests.harness import RunningServer, add_key, make_account, revoke_key
from tests.mcp.conftest import connect, mcp_url, session_id
from tests.mcp.test_sessions import call

MODERN = "2026-07-28"


def uris(session: str) -> tuple[str, str]:
    return f"engram://sessions/{session}/status", f"engram://sessions/{session}/changes"


async def read_json(client: Client, uri: str) -> dict[str, Any]:
    result = await client.read_resource(uri)
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents) and contents.mime_type == "application/json"
    body: dict[str, Any] = json.loads(contents.text)
    return body


async def next_event(subscription: Any, within: float = 30.0) -> ServerEvent:
    with anyio.fail_after(within):
        event: ServerEvent = await subscription.__anext__()
    return event


@pytest.mark.anyio
async def test_session_resources_are_listed_and_read_only_in_their_own_session(api: RunningServer) -> None:
    me = make_account(api)
    status_uri, changes_uri = uris("web")
    async with (
        connect(api, me.key, session_id(me.user_id, "web", "a"), mode=MODERN) as a,
        connect(api, me.key, me.user_id, mode=MODERN) as plain,
    ):
        listed = {str(r.uri) for r in (await a.list_resources()).resources}
        assert listed == {status_uri, changes_uri, "engram://sessions/web/inbox", "engram://sessions/web/tasks"}
        assert (await plain.list_resources()).resources == []

        await call(a, "session_broadcast_change", file_paths=["a.py"], changes_summary="made a.py")
        status = await read_json(a, status_uri)
        assert status["you"] == "a" and status["recent_changes"][0]["changes_summary"] == "made a.py"
        changes = await read_json(a, changes_uri)
        assert [c["agent"] for c in changes["changes"]] == ["a"] and changes["cursor"]

        # Another session of the same user, a made-up resource, and a plain user's endpoint: all not found.
        for client, uri in [(a, "engram://sessions/other/status"), (a, "engram://nothing"), (plain, status_uri)]:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert "Resource not found" in refused.value.error.message


@pytest.mark.anyio
async def test_listen_pushes_the_other_agents_events_to_their_subscribers(either_backend: RunningServer) -> None:
    server = either_backend
    me = make_account(server)
    status_uri, changes_uri = uris("live")
    async with (
        connect(server, me.key, session_id(me.user_id, "live", "a"), mode=MODERN) as a,
        connect(server, me.key, session_id(me.user_id, "live", "b"), mode=MODERN) as b,
        b.listen(resource_subscriptions=[changes_uri, status_uri, "engram://sessions/other/changes"]) as feed,
    ):
        # Only the caller's own session resources are honored, never another session's.
        assert sorted(feed.honored.resource_subscriptions or []) == sorted([changes_uri, status_uri])

        # How fast a notification arrives is measured by bench/coordination.py; here only that each one does.
        cursor = (await call(b, "session_sync_changes"))["cursor"]
        for i in range(20):
            await call(a, "session_broadcast_change", file_paths=["x.py"], changes_summary=f"change {i}")
            seen: set[str] = set()
            while seen != {changes_uri, status_uri}:
                event = await next_event(feed)
                assert isinstance(event, ResourceUpdated)
                seen.add(event.uri)
            # Notified, the client syncs from its cursor and finds exactly the new change.
            synced = await call(b, "session_sync_changes", since=cursor)
            assert [c["changes_summary"] for c in synced["changes"]] == [f"change {i}"]
            cursor = synced["cursor"]

        # Claims and releases move the status only; nobody hears their own events.
        await call(b, "session_claim_files", file_paths=["mine.py"])
        await call(a, "session_claim_files", file_paths=["y.py"])
        assert await next_event(feed) == ResourceUpdated(uri=status_uri)
        assert [c["file_path"] for c in (await read_json(b, status_uri))["claims"]] == ["mine.py", "y.py"]
        await call(a, "session_release_files", file_paths=["y.py"])
        assert await next_event(feed) == ResourceUpdated(uri=status_uri)
        with anyio.move_on_after(0.3) as quiet:
            await call(b, "session_broadcast_change", changes_summary="my own")
            await feed.__anext__()
        assert quiet.cancelled_caught, "an agent was notified of its own broadcast"


@asynccontextmanager
async def agent_and_raw_listener(
    server: RunningServer, user_id: str, session: str, agent_key: str, listener_key: str
) -> AsyncIterator[tuple[Client, MemoryObjectReceiveStream[dict[str, Any]]]]:
    """Agent ``a`` of ``session`` over the SDK, and agent ``b`` listening to its changes resource over plain HTTP."""
    _, changes_uri = uris(session)
    send, frames = anyio.create_memory_object_stream[dict[str, Any]](10)
    async with (
        connect(server, agent_key, session_id(user_id, session, "a"), mode=MODERN) as a,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(_raw_listen, server, listener_key, session_id(user_id, session, "b"), [changes_uri], send)
        yield a, frames
        tasks.cancel_scope.cancel()


async def _raw_listen(
    server: RunningServer, key: str, user_id: str, uris_: list[str], frames: MemoryObjectSendStream[dict[str, Any]]
) -> None:
    """A listen request over plain HTTP, collecting the SSE frames, to pin the wire format."""
    body = {
        "jsonrpc": "2.0",
        "id": "listen-raw",
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"resourceSubscriptions": uris_},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream("POST", mcp_url(server, user_id), json=body, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                await frames.send(json.loads(line[5:]))


@pytest.mark.anyio
async def test_listen_frames_carry_the_subscription_id_and_the_event(api: RunningServer) -> None:
    me = make_account(api)
    _, changes_uri = uris("wire")
    async with agent_and_raw_listener(api, me.user_id, "wire", me.key, me.key) as (a, frames):
        with anyio.fail_after(30):
            ack = await frames.receive()
            await call(a, "session_broadcast_change", file_paths=["w.py"], changes_summary="wired")
            update = await frames.receive()

    subscription = {"io.modelcontextprotocol/subscriptionId": "listen-raw"}
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"] == subscription
    assert ack["params"]["notifications"] == {"resourceSubscriptions": [changes_uri]}
    assert update["method"] == "notifications/resources/updated" and update["params"]["uri"] == changes_uri
    event = update["params"]["_meta"]["engram/event"]
    assert update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-raw"
    assert (event["kind"], event["agent"], event["session"]) == ("change", "a", "wire")
    assert event["data"]["summary"] == "wired" and event["data"]["paths"] == ["w.py"]


@pytest.mark.anyio
async def test_listen_without_coordination_is_a_clear_error(redis_down_api: RunningServer) -> None:
    me = make_account(redis_down_api)
    _, changes_uri = uris("web")
    async with connect(redis_down_api, me.key, session_id(me.user_id, "web", "a"), mode=MODERN) as client:
        with pytest.raises(MCPError) as failed:
            async with client.listen(resource_subscriptions=[changes_uri]):
                pass
        assert "coordination unavailable" in failed.value.error.message
        # The memory tools are untouched by it.
        added = await call(client, "add_memories", memories=[{"content": "still here"}])
        assert added["results"][0]["content"] == "still here"


@pytest.mark.anyio
async def test_a_listen_stream_ends_with_an_error_once_its_key_is_revoked(api: RunningServer) -> None:
    me = make_account(api)
    listener = add_key(api, me.user_id)
    async with agent_and_raw_listener(api, me.user_id, "gone", me.key, listener.key) as (a, frames):
        with anyio.fail_after(30):
            ack = await frames.receive()
            await anyio.to_thread.run_sync(lambda: revoke_key(api, listener.key_id))
            await anyio.sleep(api.settings.stream_recheck_seconds)
            await call(a, "session_broadcast_change", changes_summary="after the revocation")
            last = await frames.receive()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert last["id"] == "listen-raw" and "revoked" in last["error"]["message"]
