"""A real browser (Chromium through Playwright): sign up, create a key, copy the install command, add a memory
through MCP with it, and see the memory in the dashboard. Screenshots at phone and laptop sizes land in tmp_path."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.harness import RunningServer
from tests.web.conftest import LAPTOP, PASSWORD, PHONE, new_email

COMMAND = re.compile(
    r"^npx install-mcp '([^']+)' --client claude-code --header 'Authorization: Bearer (egk_\w+)' "
    r"--oauth no --yes --name engram-my-project-agent-1$"
)


async def _add_through_mcp(url: str, key: str, content: str) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("add_memories", {"memories": [{"content": content, "tags": ["browser"]}]})
        assert not result.is_error, result


def test_signup_key_install_command_mcp_and_dashboard_in_a_real_browser(
    chromium: Any, api: RunningServer, tmp_path: Path
) -> None:
    context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=api.base_url)
    page = context.new_page()
    page.set_default_timeout(15_000)

    page.goto("/")
    page.get_by_role("link", name="Sign up").first.click()
    page.fill("#f-email", new_email())
    page.fill("#f-password", PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/dashboard")

    page.fill("#f-name", "browser test")
    page.get_by_role("button", name="Create key").click()
    page.wait_for_selector("#new-key")
    key_shown = page.inner_text("#cmd-new-key").strip()

    page.click("button[data-copy='cmd-claude-code-key']")
    # A selector, not wait_for_function: the page's CSP forbids the eval that a JavaScript predicate needs.
    page.wait_for_selector("button[data-copy='cmd-claude-code-key']:text-is('Copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    match = COMMAND.match(copied)
    assert match, copied
    url, key = match.groups()
    assert key == key_shown
    assert re.fullmatch(rf"{re.escape(api.base_url)}/mcp/v2/claude-code/u_\w+__session__my-project__agent-1", url)

    content = "The dashboard was checked by a real browser"
    # Playwright's sync API owns this thread's event loop, so the MCP client runs on a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(_add_through_mcp(url, key, content))).result(timeout=60)

    page.get_by_role("link", name="Memories").click()
    page.fill("#f-session", "my-project")
    page.get_by_role("button", name="Show").click()
    memory = page.locator("li.memory", has_text=content)
    memory.wait_for()
    assert "#browser" in memory.inner_text()

    page.goto("/dashboard")
    page.screenshot(path=str(tmp_path / "dashboard-laptop.png"), full_page=True)
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(tmp_path / "dashboard-phone.png"), full_page=True)
    page.goto("/dashboard/memories?session=my-project")
    page.screenshot(path=str(tmp_path / "memories-phone.png"), full_page=True)
    # Nothing may be wider than the phone's screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.goto("/dashboard")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    print(f"screenshots in {tmp_path}")
    context.close()
