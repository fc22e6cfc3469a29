"""The end-user dimension over MCP: the same field the REST and Mem0 routes use, one model."""

from __future__ import annotations

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")

import pytest
from mem0 import MemoryClient

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect
from tests.mcp.test_tools import structured


@pytest.mark.anyio
async def test_mcp_tools_write_and_filter_by_end_user_as_mem0_sees_it(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as client:
        added = structured(
            await client.call_tool(
                "add_memories",
                {"memories": [{"content": "Orders oat milk", "end_user": "alice"}, {"content": "Orders espresso"}]},
            )
        )["results"]
        assert [m["end_user"] for m in added] == ["alice", None]
        hits = structured(await client.call_tool("search_memory", {"query": "milk order", "end_user": "alice"}))
        assert [h["id"] for h in hits["results"]] == [added[0]["id"]]
        listed = structured(await client.call_tool("list_memories", {"end_user": "bob"}))
        assert listed["memories"] == []
    mem0 = MemoryClient(api_key=me.key, host=api.base_url)
    assert [m["id"] for m in mem0.get_all(filters={"user_id": "alice"})["results"]] == [added[0]["id"]]
    assert mem0.get_all()["count"] == 2
    mem0.client.close()
