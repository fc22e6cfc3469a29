"""The index_files MCP tool through the official MCP client: session mode only, all or none, sources in search."""

from __future__ import annotations

import pytest

from tests.harness import RunningServer, make_account
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_sessions import call
from tests.mcp.test_tools import error_text

DEPLOY = "# Deploy\n\n## Fly\n\nProduction runs on fly.io in the ams region with one warm machine.\n"


@pytest.mark.anyio
async def test_an_agent_indexes_files_and_every_agent_of_the_session_finds_them(api: RunningServer) -> None:
    me = make_account(api)
    async with (
        connect(api, me.key, session_id(me.user_id, "shop", "reader")) as reader,
        connect(api, me.key, session_id(me.user_id, "shop", "coder")) as coder,
        connect(api, me.key, session_id(me.user_id, "other", "coder")) as stranger,
    ):
        report = await call(
            reader,
            "index_files",
            files=[{"path": "docs/deploy.md", "content": DEPLOY}, {"path": "package.json", "content": '{"a": 1}'}],
        )
        assert (report["added"], report["chunks_written"], report["session"]) == (2, 2, "shop")
        again = await call(reader, "index_files", files=[{"path": "docs/deploy.md", "content": DEPLOY}])
        assert (again["unchanged"], again["chunks_written"]) == (1, 0)

        found = await call(coder, "search_memory", query="which region does production run in?")
        assert found["results"][0]["source"] == "docs/deploy.md > Deploy > Fly"
        assert found["results"][0]["agent"] == "reader"
        topics = {t["tag"]: t["count"] for t in (await call(coder, "list_topics"))["topics"]}
        assert topics == {"document": 2, "markdown": 1, "json": 1}
        elsewhere = await call(stranger, "search_memory", query="which region does production run in?")
        assert all(r["source"] is None for r in elsewhere["results"])

        refused = await reader.call_tool(
            "index_files",
            {"files": [{"path": "ok.md", "content": "# Ok\n"}, {"path": "../../etc/x.md", "content": "x"}]},
        )
        assert "outside_project" in error_text(refused) and "../../etc/x.md" in error_text(refused)
        listed = await call(coder, "list_memories", tags=["document"])
        assert sorted(m["source"] for m in listed["memories"]) == ["docs/deploy.md > Deploy > Fly", "package.json"]


@pytest.mark.anyio
async def test_index_files_is_a_session_tool(api: RunningServer) -> None:
    me = make_account(api)
    async with connect(api, me.key, me.user_id) as plain:
        assert "index_files" not in [t.name for t in (await plain.list_tools()).tools]
        result = await plain.call_tool("index_files", {"files": [{"path": "a.md", "content": "# A\n"}]})
        assert "only in session mode" in error_text(result)
