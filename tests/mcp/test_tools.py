"""The tools through the official MCP client over real HTTP: listing, round trips, structured content, scopes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent

from tests.harness import RunningServer, add_key, make_account
from tests.mcp.conftest import connect, session_id

MEMORY_TOOLS = ["add_memories", "search_memory", "list_memories", "update_memory", "delete_memories", "list_topics"]
SESSION_TOOLS = [
    "session_status",
    "session_claim_files",
    "session_release_files",
    "session_broadcast_change",
    "session_sync_changes",
    "session_join",
    "session_leave",
    "session_send_message",
    "session_inbox",
    "session_task_create",
    "session_task_claim",
    "session_task_complete",
    "session_task_release",
    "session_task_list",
]


def structured(result: CallToolResult) -> dict[str, Any]:
    """The structured content, after checking the text content carries the same JSON."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert json.loads(text.text) == result.structured_content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    text = result.content[0]
    assert isinstance(text, TextContent)
    return text.text


@pytest.mark.anyio
async def test_plain_mode_lists_memory_tools_only_with_schemas(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == MEMORY_TOOLS
    for tool in tools:
        assert tool.description and tool.output_schema and tool.input_schema["type"] == "object"
    search = next(t for t in tools if t.name == "search_memory").input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["limit"]["maximum"] == 100
    assert search["properties"]["query"]["description"]
    add = next(t for t in tools if t.name == "add_memories").input_schema
    assert add["properties"]["memories"]["minItems"] == 1


@pytest.mark.anyio
async def test_session_mode_lists_session_tools_first_and_names_the_agent(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, session_id(me.user_id, "webscraper", "research")) as client:
        tools = (await client.list_tools()).tools
        assert client.instructions is not None and "`research`" in client.instructions
    assert [t.name for t in tools] == SESSION_TOOLS + MEMORY_TOOLS + ["index_files"]
    assert tools[0].description is not None
    assert tools[0].description.startswith("You are agent `research` in session `webscraper`")


@pytest.mark.anyio
async def test_session_tools_outside_session_mode_are_a_clear_error(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as client:
        result = await client.call_tool("session_claim_files", {"file_paths": ["a.py"]})
    assert "only in session mode" in error_text(result)


@pytest.mark.anyio
async def test_memory_tools_round_trip_with_structured_content(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as client:
        added = structured(
            await client.call_tool(
                "add_memories",
                {
                    "memories": [
                        {"content": "The API paginates with opaque cursors, never offsets", "tags": ["api"]},
                        {"content": "Deploys go out on Tuesdays only", "tags": ["ops"], "metadata": {"team": "infra"}},
                    ]
                },
            )
        )["results"]
        assert [m["scope"] for m in added] == ["user", "user"]
        cursor_id, deploy_id = added[0]["id"], added[1]["id"]

        hits = structured(await client.call_tool("search_memory", {"query": "how does pagination work", "limit": 1}))
        assert [h["id"] for h in hits["results"]] == [cursor_id]
        ops = structured(await client.call_tool("search_memory", {"query": "when do deploys go out", "tags": ["ops"]}))
        assert [h["id"] for h in ops["results"]] == [deploy_id]
        api_only = structured(
            await client.call_tool("search_memory", {"query": "when do deploys go out", "tags": ["api"]})
        )
        assert deploy_id not in [h["id"] for h in api_only["results"]]

        page = structured(await client.call_tool("list_memories", {"limit": 1}))
        assert [m["id"] for m in page["memories"]] == [deploy_id] and page["next_cursor"]
        rest = structured(await client.call_tool("list_memories", {"limit": 1, "cursor": page["next_cursor"]}))
        assert [m["id"] for m in rest["memories"]] == [cursor_id]

        updated = structured(
            await client.call_tool("update_memory", {"memory_id": deploy_id, "content": "Deploys go out on Wednesdays"})
        )
        assert updated["content"] == "Deploys go out on Wednesdays" and updated["tags"] == ["ops"]

        topics = structured(await client.call_tool("list_topics", {}))
        assert topics["topics"] == [{"tag": "api", "count": 1}, {"tag": "ops", "count": 1}]

        deleted = structured(await client.call_tool("delete_memories", {"memory_ids": [cursor_id]}))
        assert deleted == {"deleted": [cursor_id]}
        left = structured(await client.call_tool("list_memories", {}))
        assert [m["id"] for m in left["memories"]] == [deploy_id]


@pytest.mark.anyio
async def test_session_memories_default_to_session_scope_and_may_choose_another(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, session_id(me.user_id, "web", "research")) as client:
        added = structured(
            await client.call_tool(
                "add_memories",
                {
                    "memories": [
                        {"content": "Scraper targets example.org"},
                        {"content": "Prefers tabs", "scope": "user"},
                    ]
                },
            )
        )["results"]
    assert [(m["scope"], m["session"], m["agent"]) for m in added] == [
        ("session", "web", "research"),
        ("user", "web", "research"),
    ]


@pytest.mark.anyio
async def test_bad_arguments_and_unknown_ids_are_tool_errors(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as client:
        empty = await client.call_tool("add_memories", {"memories": []})
        assert "memories" in error_text(empty)
        typo = await client.call_tool("search_memory", {"qeury": "x"})
        assert "qeury" in error_text(typo)
        missing = await client.call_tool("delete_memories", {"memory_ids": ["no-such-id"]})
        assert "no-such-id" in error_text(missing)
        wrong_scope = await client.call_tool("add_memories", {"memories": [{"content": "x", "scope": "session"}]})
        assert "session" in error_text(wrong_scope)


@pytest.mark.anyio
async def test_read_scope_key_cannot_call_write_tools(api: RunningServer) -> None:
    me = make_account(api)
    reader = add_key(api, me.user_id, scope="read")
    async with connect(api, reader.key, session_id(me.user_id, "web", "reader")) as client:
        refused = await client.call_tool("add_memories", {"memories": [{"content": "nope"}]})
        assert "read scope" in error_text(refused)
        claim = await client.call_tool("session_claim_files", {"file_paths": ["a.py"]})
        assert "read scope" in error_text(claim)
        assert structured(await client.call_tool("search_memory", {"query": "anything"}))["results"] == []
        assert structured(await client.call_tool("session_status", {}))["you"] == "reader"


@pytest.mark.anyio
async def test_coordination_down_is_a_tool_error_and_memories_keep_working(redis_down_api: RunningServer) -> None:
    me = make_account(redis_down_api)
    async with connect(redis_down_api, me.key, session_id(me.user_id, "web", "a")) as client:
        for name, args in [
            ("session_claim_files", {"file_paths": ["a.py"]}),
            ("session_sync_changes", {}),
            ("session_status", {}),
        ]:
            assert "coordination unavailable" in error_text(await client.call_tool(name, args))
        added = structured(await client.call_tool("add_memories", {"memories": [{"content": "still works"}]}))
        assert added["results"][0]["content"] == "still works"


@pytest.mark.anyio
async def test_stateless_revision_through_the_official_client(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, session_id(me.user_id, "web", "modern"), mode="2026-07-28") as client:
        assert client.protocol_version == "2026-07-28"
        assert [t.name for t in (await client.list_tools()).tools][:1] == ["session_status"]
        claim = structured(await client.call_tool("session_claim_files", {"file_paths": ["modern.py"]}))
        assert claim["granted"] is True
        added = structured(await client.call_tool("add_memories", {"memories": [{"content": "stateless works"}]}))
        assert added["results"][0]["agent"] == "modern"
