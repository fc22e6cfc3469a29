"""The bridge install-mcp writes into clients' configs: ``npx -y mcp-remote <url> --header ...`` over stdio."""

from __future__ import annotations

import os
import shutil
import subprocess

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import REQUIRE_SERVICES
from tests.harness import RunningServer, make_account
from tests.mcp.conftest import mcp_url, session_id
from tests.mcp.test_tools import structured

# Pinned, so npx installs it once into its cache and later runs start offline.
MCP_REMOTE = "mcp-remote@0.15.1"


@pytest.fixture(scope="session")
def npx() -> str:
    path = shutil.which("npx")
    if path is None:
        if REQUIRE_SERVICES:
            pytest.fail("npx is missing and ENGRAM_REQUIRE_SERVICES=1 demands the mcp-remote test", pytrace=False)
        pytest.skip("npx is not installed (set ENGRAM_REQUIRE_SERVICES=1 to fail instead)")
    installed = subprocess.run(
        [path, "-y", MCP_REMOTE, "--help"], capture_output=True, text=True, timeout=300, check=False
    )
    if "Usage" not in installed.stdout + installed.stderr:
        pytest.fail(f"could not install {MCP_REMOTE}: {installed.stderr[-2000:]}", pytrace=False)
    return path


@pytest.mark.anyio
async def test_mcp_remote_bridge_lists_and_calls_tools(api: RunningServer, npx: str) -> None:
    me = make_account(api)
    url = mcp_url(api, session_id(me.user_id, "bridge", "claude"))
    bridge = StdioServerParameters(
        command=npx,
        args=["-y", MCP_REMOTE, url, "--header", f"Authorization: Bearer {me.key}", "--transport", "http-only"],
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")},
    )
    with anyio.fail_after(120):  # npx starts a node process: seconds; only a hang reaches this
        async with Client(bridge, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            assert tools[0].description is not None and "agent `claude`" in tools[0].description
            assert {"add_memories", "search_memory", "session_claim_files"} <= {t.name for t in tools}
            added = structured(await client.call_tool("add_memories", {"memories": [{"content": "Bridged fine"}]}))
            assert added["results"][0]["scope"] == "session"
            hits = structured(await client.call_tool("search_memory", {"query": "bridged"}))
            assert hits["results"][0]["content"] == "Bridged fine"
            claim = structured(await client.call_tool("session_claim_files", {"file_paths": ["app.py"]}))
            assert claim["granted"] is True
