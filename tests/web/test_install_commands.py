"""The install panel's commands work exactly as printed, in a script with no terminal: the real install-mcp writes one
entry per session and agent, and the entry it writes (the real mcp-remote bridge) reaches Engram."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import REQUIRE_SERVICES
from tests.web.conftest import Browser

# The npm cache outside the throwaway HOME, so install-mcp and mcp-remote are fetched once, not per test run.
NPM_CACHE = str(Path.home() / ".npm")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def npx() -> str:
    path = shutil.which("npx")
    if path is None:
        if REQUIRE_SERVICES:
            pytest.fail("npx is missing and ENGRAM_REQUIRE_SERVICES=1 demands the install-mcp test", pytrace=False)
        pytest.skip("npx is not installed (set ENGRAM_REQUIRE_SERVICES=1 to fail instead)")
    return path


def _printed(page_html: str) -> dict[str, str]:
    found = re.findall(r'<pre id="cmd-([a-z-]+)" class="command">(.*?)</pre>', page_html, re.S)
    return {name: html_lib.unescape(text) for name, text in found}


def _panel_after_creating_a_key(me: Browser, session: str, agent: str) -> dict[str, str]:
    """The commands of the page a new key lands on, for this session and agent: what a person copies."""
    page = me.follow(
        me.submit(
            f"/dashboard?session={session}&agent={agent}",
            "/dashboard/keys",
            name=agent,
            session=session,
            agent=agent,
            scope="write",
        )
    )
    return _printed(page.text)


def _run_as_a_script(command: str, home: Path) -> None:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "npm_config_cache": NPM_CACHE, "CI": "1"}
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.mark.anyio
async def test_printed_commands_install_one_working_entry_per_agent_without_a_terminal(
    browser: Callable[[], Browser], npx: str, tmp_path: Path
) -> None:
    me = browser().signup()
    home = tmp_path / "home"
    home.mkdir()
    research = _panel_after_creating_a_key(me, "webscraper", "research")
    coder = _panel_after_creating_a_key(me, "webscraper", "coder")
    for commands in (research, coder):
        assert "<your-key>" not in commands["claude-code-key"]
        _run_as_a_script(commands["claude-code-key"], home)
    _run_as_a_script(coder["cursor-key"], home)

    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]
    # The second install added an entry rather than replacing the first.
    assert {"engram-webscraper-research", "engram-webscraper-coder"} <= set(claude)
    cursor = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert "engram-webscraper-coder" in cursor

    # Start the entry as Claude Code would, and use Engram through it.
    entry = claude["engram-webscraper-coder"]
    bridge = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={"HOME": str(home), "PATH": os.environ.get("PATH", ""), "npm_config_cache": NPM_CACHE},
    )
    with anyio.fail_after(120):
        async with Client(bridge, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            assert tools[0].description is not None and "agent `coder`" in tools[0].description
            added = await client.call_tool("add_memories", {"memories": [{"content": "Installed as printed"}]})
            assert not added.is_error, added.content
