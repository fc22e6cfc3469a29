"""mcp-remote (the stdio bridge install-mcp writes into clients' configs) signs in to Engram by OAuth.

mcp-remote prints the authorization URL on stderr and tries to open a browser; here the "browser" is the test: it
reads the URL from mcp-remote's stderr, approves on the consent page as a logged-in user, and follows the redirect
to mcp-remote's own loopback callback, exactly as a browser would.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.harness import RunningServer
from tests.mcp.test_mcp_remote import MCP_REMOTE
from tests.mcp.test_tools import structured
from tests.oauth.conftest import approve, mcp_resource
from tests.web.conftest import Browser

_AUTHORIZE = re.compile(r"Please authorize this client by visiting:\s*(\S+)")


async def _wait_for_authorization_url(log: Path) -> str:
    while True:
        match = _AUTHORIZE.search(await anyio.Path(log).read_text(errors="replace"))
        if match:
            return match.group(1)
        await anyio.sleep(0.05)


async def _act_as_browser(log: Path, user: Browser, resource: str, done: list[str]) -> None:
    url = await _wait_for_authorization_url(log)
    params = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert params["code_challenge_method"] == "S256"
    assert params["resource"] == resource
    consent = await anyio.to_thread.run_sync(lambda: approve(user, params))
    callback = consent.headers["location"]
    assert urlsplit(callback).hostname in ("localhost", "127.0.0.1") and "code=" in callback
    async with httpx.AsyncClient(timeout=30) as browser:
        delivered = await browser.get(callback)
    assert delivered.status_code < 400, delivered.text
    done.append(callback)


@pytest.mark.anyio
async def test_mcp_remote_signs_in_with_oauth_and_lists_tools(
    api: RunningServer,
    user: Browser,
    npx: str,
    tmp_path: Path,
) -> None:
    assert user.user_id is not None
    url = mcp_resource(api, user.user_id, "mcp-remote")
    log = tmp_path / "mcp-remote.log"
    bridge = StdioServerParameters(
        command=npx,
        args=["-y", MCP_REMOTE, url, "--transport", "http-only", "--auth-timeout", "60"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            # Its own credential store, so no token from an earlier run is reused.
            "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "mcp-auth"),
            # No browser: the URL is only printed (and read back by the test).
            "BROWSER": "/bin/false",
            "DISPLAY": "",
        },
    )
    done: list[str] = []
    with anyio.fail_after(120), log.open("w") as errlog:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_act_as_browser, log, user, url, done)
            async with Client(stdio_client(bridge, errlog=errlog), mode="legacy") as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert {"add_memories", "search_memory"} <= tools
                added = structured(await client.call_tool("add_memories", {"memories": [{"content": "via bridge"}]}))
                assert added["results"][0]["content"] == "via bridge"
            tasks.cancel_scope.cancel()
    assert done, log.read_text()
