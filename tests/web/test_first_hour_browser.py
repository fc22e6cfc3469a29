"""What a person notices in the first hour, in a real browser (Chromium through Playwright): the new key stays in the
install commands while they stay on the page, commands wrap only between words, destructive buttons ask first and
say what they did, the consent page's two buttons look different, one password hint, a favicon, long memories fold.
Screenshots land in tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.harness import RunningServer
from tests.oauth.conftest import authorize_params, mcp_resource, new_pkce, register
from tests.web.conftest import LAPTOP, PASSWORD, PHONE, new_email

PLACEHOLDER = "<your-key>"
# The tokens of each command that the browser drew on more than one line (a token is what lies between spaces).
SPLIT_TOKENS = """
() => Array.from(document.querySelectorAll("pre.command")).flatMap((pre) => {
  const broken = [];
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const pattern = /[^ ]+/g;
    let match;
    while ((match = pattern.exec(node.textContent)) !== null) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
      if (tops.size > 1) broken.push(match[0]);
    }
  }
  return broken;
})
"""


def _new_page(chromium: Any, api: RunningServer, viewport: dict[str, int] = LAPTOP) -> Any:
    context = chromium.new_context(viewport=viewport, base_url=api.base_url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


def _sign_up(page: Any) -> str:
    page.goto("/signup")
    page.fill("#f-email", new_email())
    page.fill("#f-password", PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/dashboard")
    user_id: str = page.inner_text("footer code").strip()
    return user_id


def _create_key(page: Any, name: str) -> str:
    page.fill("#f-name", name)
    page.get_by_role("button", name="Create key").click()
    page.wait_for_selector("#new-key:not([hidden])")
    key: str = page.inner_text("#cmd-new-key").strip()
    return key


def _commands(page: Any) -> list[str]:
    """The install panel's commands that take a key (the OAuth ones log in instead)."""
    texts: list[str] = page.locator("#install pre.command").all_inner_texts()
    with_key = [text for text in texts if "Authorization: Bearer" in text]
    assert len(with_key) == 3, texts
    return with_key


def _key_rows(page: Any) -> int:
    count: int = page.locator("tr[data-key-id]").count()
    return count


def test_the_new_key_stays_in_the_commands_while_the_person_stays_on_the_page(
    chromium: Any, api: RunningServer, tmp_path: Path
) -> None:
    page = _new_page(chromium, api)
    _sign_up(page)
    key = _create_key(page, "laptop")
    assert all(key in command for command in _commands(page))

    # A reload repeats the page the form led to, not the form: still one key, and the commands keep it.
    page.reload()
    page.wait_for_selector("#install")
    assert _key_rows(page) == 1
    assert all(key in command and PLACEHOLDER not in command for command in _commands(page))

    # Build for another session and agent: a new page from the server, the key still in every command.
    page.fill("#f-session", "webscraper")
    page.fill("#f-agent", "research")
    page.get_by_role("button", name="Build commands").click()
    page.wait_for_url("**/dashboard?session=webscraper&agent=research*")
    commands = _commands(page)
    assert all(key in command for command in commands)
    assert "--name engram-webscraper-research" in commands[0]
    assert page.inner_text("#cmd-new-key").strip() == key
    page.screenshot(path=str(tmp_path / "install-after-build.png"), full_page=True)

    # Leaving the page forgets it: back on the dashboard, the placeholder again, and nothing left in the tab.
    page.get_by_role("link", name="Memories").click()
    page.wait_for_url("**/dashboard/memories")
    page.get_by_role("link", name="Keys & install").click()
    page.wait_for_url("**/dashboard")
    assert all(key not in command and PLACEHOLDER in command for command in _commands(page))
    assert page.locator("#new-key").is_hidden()
    assert page.evaluate("sessionStorage.length") == 0
    assert _key_rows(page) == 1
    page.context.close()


def test_commands_wrap_only_between_words(chromium: Any, api: RunningServer, tmp_path: Path) -> None:
    for viewport in (PHONE, LAPTOP):
        page = _new_page(chromium, api, viewport)
        _sign_up(page)
        _create_key(page, "phone")
        assert page.evaluate(SPLIT_TOKENS) == []
        # Nothing is wider than the screen: a token longer than the box scrolls inside it.
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        page.screenshot(path=str(tmp_path / f"commands-{viewport['width']}.png"), full_page=True)
        page.context.close()


def _answer_dialogs(page: Any, accept: bool, seen: list[str]) -> None:
    def answer(dialog: Any) -> None:
        seen.append(dialog.message)
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.once("dialog", answer)


def _notice(page: Any) -> str:
    text: str = page.inner_text(".notice-banner").strip()
    return text


def test_revoke_and_delete_ask_first_and_say_what_they_did(chromium: Any, api: RunningServer, tmp_path: Path) -> None:
    page = _new_page(chromium, api)
    _sign_up(page)
    key = _create_key(page, "laptop")
    with httpx.Client(base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        long_text = "The deploy checklist. " + " ".join(f"Step {n}: check item {n} twice." for n in range(55))
        assert http.post("/v1/memories", json={"content": "Keep me around"}).status_code == 201
        assert http.post("/v1/memories", json={"content": long_text}).status_code == 201
        machine = http.post(
            "/oauth/register",
            json={"client_name": "nightly job", "grant_types": ["client_credentials"]},
        )
        assert machine.status_code == 201, machine.text
    page.goto("/dashboard")

    # Cancelled: nothing happens.
    seen: list[str] = []
    _answer_dialogs(page, False, seen)
    page.locator("tr[data-key-id] button", has_text="Revoke").click()
    assert seen == ["Revoke the key “laptop”? Every program using it stops working at once."]
    assert page.locator("tr.active[data-key-id]").count() == 1
    # Confirmed: done, and said so.
    _answer_dialogs(page, True, seen)
    page.locator("tr[data-key-id] button", has_text="Revoke").click()
    page.wait_for_selector(".notice-banner")
    assert _notice(page) == "Key “laptop” revoked: requests with it now get 401."
    assert page.locator("tr.revoked[data-key-id]").count() == 1

    page.goto("/dashboard/sync")
    _answer_dialogs(page, True, seen)
    page.locator("tr[data-client-id] button", has_text="Revoke").click()
    page.wait_for_selector(".notice-banner:has-text('Machine client')")
    assert seen[-1].startswith("Revoke the machine client “nightly job”?")
    assert "revoked" in _notice(page) and page.locator("tr.revoked[data-client-id]").count() == 1

    page.goto("/dashboard/memories")
    keep = page.locator("li.memory", has_text="Keep me around")
    _answer_dialogs(page, False, seen)
    keep.get_by_role("button", name="Delete").click()
    assert seen[-1].startswith("Delete this memory?")
    assert page.locator("li.memory").count() == 2

    # A long memory is folded to a preview; "show all" unfolds it.
    folded = page.locator("li.memory", has_text="The deploy checklist.")
    assert folded.locator(".show-all").is_visible()
    assert not folded.locator(".content.full").is_visible()
    assert "Step 54" not in folded.inner_text()
    folded.locator(".show-all").click()
    assert folded.locator(".content.full").is_visible() and "Step 54: check item 54 twice." in folded.inner_text()
    assert keep.locator(".show-all").count() == 0
    page.screenshot(path=str(tmp_path / "memories-unfolded.png"), full_page=True)

    _answer_dialogs(page, True, seen)
    keep.get_by_role("button", name="Delete").click()
    page.wait_for_selector(".notice-banner")
    assert _notice(page) == "Memory deleted. Its history is kept."
    assert page.locator("li.memory").count() == 1
    page.context.close()


def test_the_consent_page_shows_two_different_buttons(chromium: Any, api: RunningServer, tmp_path: Path) -> None:
    page = _new_page(chromium, api)
    user_id = _sign_up(page)
    client = register(api)
    params = authorize_params(client["client_id"], new_pkce(), mcp_resource(api, user_id))
    page.goto("/oauth/authorize?" + urlencode(params))
    allow = page.get_by_role("button", name="Allow")
    deny = page.get_by_role("button", name="Deny")
    style = "(b) => { const s = getComputedStyle(b); return [s.backgroundColor, s.color]; }"
    assert allow.evaluate(style) != deny.evaluate(style)
    page.screenshot(path=str(tmp_path / "consent.png"))
    page.context.close()


def test_signup_gives_one_password_hint_and_the_pages_have_an_icon(
    chromium: Any, api: RunningServer, tmp_path: Path
) -> None:
    page = _new_page(chromium, api)
    icons: list[int] = []
    page.on("response", lambda r: icons.append(r.status) if "favicon" in r.url else None)
    page.goto("/signup")
    hints = page.locator("main").get_by_text("10 characters")
    assert hints.count() == 1
    page.fill("#f-email", new_email())
    page.fill("#f-password", "short")
    page.get_by_role("button", name="Create account").click()
    page.wait_for_selector("#e-password")
    # The error says it; the hint saying the same again is gone.
    assert hints.count() == 1 and page.inner_text("#e-password") == "use at least 10 characters"
    page.screenshot(path=str(tmp_path / "signup-error.png"))
    href = page.get_attribute("link[rel=icon]", "href")
    response = page.request.get(href)
    assert response.status == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert icons and all(status == 200 for status in icons)
    page.context.close()
