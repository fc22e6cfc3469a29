"""Every integer a client sends that reaches SQL is bounded where it comes in: a number the column cannot hold is a
4xx naming the field, never the driver's overflow (a 500) on SQLite or PostgreSQL, over REST, MCP and sync."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from app.sync import hlc
from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.sync.test_protocol import pull, push, token_for, wire

HUGE = 99999999999999999999999
# Just past what a 64-bit integer holds (SQLite's, and PostgreSQL's bigint: event and message ids).
PAST_INT64 = 2**63
TOO_BIG = (PAST_INT64, HUGE)


@pytest.fixture(params=["api", "sqlite_api"])
def server(request: pytest.FixtureRequest) -> RunningServer:
    found: RunningServer = request.getfixturevalue(request.param)
    return found


def _refused(response: Any, field: str) -> None:
    assert response.status_code in (400, 422), response.text
    assert field in response.json()["error"]["message"], response.text


def test_rest_integers_past_their_column_are_refused_naming_the_field(server: RunningServer) -> None:
    me = make_account(server)
    with server.client(me.key) as http:
        memory_id = http.post("/v1/memories", json={"content": "a memory with a history"}).json()["id"]
        sent = http.post(
            "/v1/sessions/s1/messages", params={"agent": "a"}, json={"to": "*", "kind": "status", "content": "hi"}
        )
        assert sent.status_code == 201, sent.text
        for value in TOO_BIG:
            _refused(http.get("/v1/sessions/s1/messages", params={"after": value}), "after")
            _refused(http.get(f"/v1/memories/{memory_id}/history", params={"after": value}), "after")
            message = {"to": "*", "kind": "answer", "content": "re", "reply_to": value}
            _refused(http.post("/v1/sessions/s1/messages", params={"agent": "a"}, json=message), "reply_to")
        # The largest value each column holds is an ordinary answer, on PostgreSQL as on SQLite (ids past 32 bits
        # were a driver error there once).
        for big in (2**31, PAST_INT64 - 1):
            assert http.get("/v1/sessions/s1/messages", params={"after": big}).json()["messages"] == []
            history = http.get(f"/v1/memories/{memory_id}/history", params={"after": big})
            assert history.status_code == 200 and history.json()["history"] == [], history.text
        message = {"to": "*", "kind": "answer", "content": "re", "reply_to": PAST_INT64 - 1}
        unknown = http.post("/v1/sessions/s1/messages", params={"agent": "a"}, json=message)
        assert unknown.status_code in (404, 422) and "reply_to" in unknown.text, unknown.text
        assert [m["content"] for m in http.get("/v1/sessions/s1/messages").json()["messages"]] == ["hi"]


def test_metadata_integers_beyond_64_bits_are_refused_in_writes_and_filters(server: RunningServer) -> None:
    me = make_account(server)
    with server.client(me.key) as http:
        for value in (PAST_INT64, -PAST_INT64 - 1, HUGE):
            _refused(http.post("/v1/memories", json={"content": "x", "metadata": {"n": value}}), "metadata")
            _refused(http.post("/v1/memories/search", json={"query": "x", "metadata": {"n": value}}), "metadata")
        kept = http.post("/v1/memories", json={"content": "a big number", "metadata": {"n": PAST_INT64 - 1}})
        assert kept.status_code == 201, kept.text
        found = http.post("/v1/memories/search", json={"query": "a big number", "metadata": {"n": PAST_INT64 - 1}})
        assert found.status_code == 200 and [r["id"] for r in found.json()["results"]] == [kept.json()["id"]]
        assert len(http.get("/v1/memories").json()["memories"]) == 1


def test_sync_integers_past_64_bits_are_refused_naming_the_field(server: RunningServer) -> None:
    me = make_account(server)
    token = token_for(server, me.user_id)
    for seq in (PAST_INT64, 10**19 - 1):
        _refused(pull(server, token, cursor=f"l{seq}"), "cursor")
        _refused(pull(server, token, cursor=f"s{seq}.{uuid.uuid4()}"), "cursor")
    for value in (PAST_INT64, HUGE):
        _refused(pull(server, token, limit=value), "limit")
    # The largest hlc a 64-bit column holds is 2**47 - 1 milliseconds; beyond it the version cannot be stored.
    for stamp in ("140737488355328.0", "999999999999999.65535"):
        _refused(push(server, token, [{**wire(str(uuid.uuid4()), "x"), "hlc": stamp}]), "hlc")
    assert hlc.decode("140737488355327.65535") == 2**63 - 1
    with server.client(me.key) as http:
        assert http.get("/v1/memories").json()["memories"] == []


@pytest.mark.anyio
async def test_mcp_integers_past_their_column_are_invalid_arguments_naming_the_field(server: RunningServer) -> None:
    me = make_account(server)
    async with connect(server, me.key, session_id(me.user_id, "s1", "a")) as client:
        for value in TOO_BIG:
            result = await client.call_tool(
                "session_send_message", {"to": "*", "kind": "answer", "content": "re", "reply_to": value}
            )
            assert result.is_error, result
            text = result.content[0].text  # type: ignore[union-attr]
            assert "invalid_arguments" in text and "reply_to" in text, text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
