"""The device grant end to end in a real browser (Chromium through Playwright) while a node polls with
app.sync.credentials: sign up, type the code, see the device named on the consent page, approve, and the node gets
sync tokens; then a second device, followed through the login page by its verification_uri_complete, is denied."""

from __future__ import annotations

import asyncio
import queue
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.accounts.principal import Principal
from app.sync import credentials as cr
from tests.harness import RunningServer
from tests.oauth.conftest import authenticate
from tests.web.conftest import LAPTOP, PASSWORD, PHONE, chromium, new_email  # noqa: F401 (the shared fixture)


def _node(api: RunningServer, name: str, flows: queue.Queue[cr.DeviceFlow]) -> Any:
    """A node linking: register, start the device flow, hand the codes to the person, poll at the edge's pace."""

    async def link() -> Any:
        async with httpx.AsyncClient(timeout=30) as http:
            edge = await cr.discover(http, api.base_url)
            client = await cr.register_device_client(http, edge, name)
            flow = await cr.start_device_flow(http, edge, client)
            flows.put(flow)
            try:
                return await cr.poll_device_flow(http, edge, client, flow)
            except cr.SyncAuthError as exc:
                return exc

    return asyncio.run(link())


def _start_node(pool: ThreadPoolExecutor, api: RunningServer, name: str) -> tuple[Future[Any], cr.DeviceFlow]:
    flows: queue.Queue[cr.DeviceFlow] = queue.Queue()
    result = pool.submit(_node, api, name, flows)
    return result, flows.get(timeout=60)


def test_a_person_links_a_device_in_a_real_browser_and_denies_another(
    chromium: Any,  # noqa: F811
    api: RunningServer,
    tmp_path: Path,
) -> None:
    email = new_email()
    with ThreadPoolExecutor(2) as pool:
        linked, flow = _start_node(pool, api, "Engram on ada-laptop")

        context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto("/signup")
        page.fill("#f-email", email)
        page.fill("#f-password", PASSWORD)
        page.get_by_role("button", name="Create account").click()
        page.wait_for_url("**/dashboard")
        user_id = re.search(r"user id (u_\w+)", page.inner_text("body")).group(1)  # type: ignore[union-attr]

        page.goto(flow.verification_uri)
        page.fill("#f-user_code", flow.user_code.lower())
        page.get_by_role("button", name="Continue").click()
        assert page.inner_text("#device-name") == "Engram on ada-laptop"
        assert page.inner_text("#user-code") == flow.user_code
        page.screenshot(path=str(tmp_path / "device-consent-laptop.png"), full_page=True)
        page.get_by_role("button", name="Approve").click()
        page.wait_for_selector("text=Device linked")

        tokens = linked.result(timeout=120)
        assert isinstance(tokens, cr.Tokens), tokens
        principal = authenticate(api, tokens.access_token, tokens.resource)
        assert isinstance(principal, Principal) and principal.user_id == user_id and principal.scopes == {"sync"}
        context.close()

        # Another device; the person follows its complete link in a fresh browser, logs in on the way, and denies.
        refused, other = _start_node(pool, api, "Engram on unknown-box")
        assert other.verification_uri_complete is not None
        context = chromium.new_context(viewport=PHONE, base_url=api.base_url)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(other.verification_uri_complete)
        page.wait_for_url("**/login?next=*")
        page.fill("#f-email", email)
        page.fill("#f-password", PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_selector("#device-name")
        assert page.inner_text("#device-name") == "Engram on unknown-box"
        page.screenshot(path=str(tmp_path / "device-consent-phone.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.get_by_role("button", name="Deny").click()
        page.wait_for_selector("text=Request denied")
        outcome = refused.result(timeout=120)
        assert isinstance(outcome, cr.DeviceFlowDenied), outcome
        context.close()
    print(f"screenshots in {tmp_path}")
