"""API keys and the install panel."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable

from tests.web.conftest import Browser, field_error, new_key_of

PLACEHOLDER = "Authorization: Bearer <your-key>"


def _key_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="(?:active|revoked)" data-key-id="[^"]+">.*?</tr>', html, re.S)


def _notice(html: str) -> str | None:
    match = re.search(r'<p class="notice-banner" role="status">([^<]*)</p>', html)
    return html_lib.unescape(match.group(1)) if match else None


def test_a_new_key_is_shown_once_and_never_listed_again(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="laptop", scope="read")
    # Post/redirect/get: the form answers a redirect, so reloading the page it lands on repeats nothing.
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard?session=my-project&agent=agent-1#new-key"
    page = me.follow(response)
    key = new_key_of(page)
    assert "shown only on this page" in page.text
    assert _notice(page.text) == "Key “laptop” created."
    # The commands carry the new key.
    assert f"--header 'Authorization: Bearer {key}'" in html_lib.unescape(page.text)

    listing = me.get(response.headers["location"]).text
    assert _notice(listing) is None
    assert key not in listing and key[4:16] not in listing
    (row,) = _key_rows(listing)
    cells = re.findall(r'<td data-label="([^"]+)">(.*?)</td>', row, re.S)
    values = {label: re.sub(r"<[^>]+>", "", text).strip() for label, text in cells}
    assert values["Name"] == "laptop" and values["Scope"] == "read" and values["Status"] == "active"
    assert values["Prefix"] == key[:10] + "…"
    assert values["Last used"] == "never" and values["Created"].endswith("UTC")

    with me.api(key) as api:
        assert api.get("/v1/memories").status_code == 200
    row = _key_rows(me.get("/dashboard").text)[0]
    assert "never" not in re.search(r'data-label="Last used">(.*?)</td>', row, re.S).group(1)  # type: ignore[union-attr]


def test_a_key_with_a_bad_name_or_scope_shows_the_error_next_to_the_field(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="   ", scope="write")
    assert response.status_code == 422
    assert "name must be 1-100 characters" in (field_error(response.text, "name") or "")
    response = me.submit("/dashboard", "/dashboard/keys", name="ok", scope="admin")
    assert response.status_code == 422
    assert "scope must be one of" in (field_error(response.text, "scope") or "")
    assert 'value="ok"' in response.text
    assert _key_rows(me.get("/dashboard").text) == []


def test_a_key_bound_to_the_install_panels_agent_acts_only_as_that_agent(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    page = me.get("/dashboard?session=shop&agent=coder")
    assert "Bind to session shop, agent coder" in page.text
    fields = {"name": "coder", "scope": "write", "session": "shop", "agent": "coder"}
    key = new_key_of(me.follow(me.submit("/dashboard", "/dashboard/keys", **fields, bind="on")))
    unbound = new_key_of(me.follow(me.submit("/dashboard", "/dashboard/keys", **{**fields, "name": "all"})))
    rows = _key_rows(me.get("/dashboard").text)
    assert [">shop / coder<" in row for row in rows] == [True, False]
    with me.api(key) as api, me.api(unbound) as other:
        wrote = api.post("/v1/memories", json={"content": "mine alone", "visibility": "private"})
        assert (wrote.status_code, wrote.json()["session"], wrote.json()["agent"]) == (201, "shop", "coder")
        refused = api.get("/v1/memories", params={"session": "shop", "agent": "tester"})
        assert refused.status_code == 403 and "bound to session 'shop' and agent 'coder'" in refused.text
        assert other.get("/v1/memories", params={"session": "shop", "agent": "tester"}).status_code == 200
    # A name a session URL could not carry is refused next to the checkbox, and no key is made.
    bad = me.submit("/dashboard", "/dashboard/keys", **{**fields, "agent": "a__b"}, bind="on")
    assert bad.status_code == 422 and "agent name 'a__b' must not contain '__'" in html_lib.unescape(bad.text)
    assert 'id="bind-error"' in bad.text and len(_key_rows(me.get("/dashboard").text)) == 2


def test_revoking_a_key_shows_it_revoked_and_the_api_refuses_it(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    key = me.create_key()
    key_id = re.search(r'data-key-id="([^"]+)"', me.get("/dashboard").text).group(1)  # type: ignore[union-attr]
    assert 'data-confirm="Revoke the key “laptop”?' in me.get("/dashboard").text
    response = me.submit("/dashboard", f"/dashboard/keys/{key_id}/revoke")
    assert response.status_code == 303
    page = me.follow(response)
    assert _notice(page.text) == "Key “laptop” revoked: requests with it now get 401."
    (row,) = _key_rows(page.text)
    assert 'class="revoked"' in row and "Revoke</button>" not in row
    assert _notice(me.get("/dashboard").text) is None
    with me.api(key) as api:
        assert api.get("/v1/memories").status_code == 401


def test_nobody_can_revoke_another_users_key(browser: Callable[[], Browser]) -> None:
    owner, other = browser().signup(), browser().signup()
    key = owner.create_key()
    key_id = re.search(r'data-key-id="([^"]+)"', owner.get("/dashboard").text).group(1)  # type: ignore[union-attr]
    response = other.submit("/dashboard", f"/dashboard/keys/{key_id}/revoke")
    assert response.status_code == 404 and "text/html" in response.headers["content-type"]
    with owner.api(key) as api:
        assert api.get("/v1/memories").status_code == 200


def _commands(html: str) -> dict[str, str]:
    found = re.findall(r'<pre id="cmd-([a-z-]+)" class="command">(.*?)</pre>', html, re.S)
    return {name: html_lib.unescape(text) for name, text in found}


def test_the_install_panel_builds_every_command_for_a_session_and_agent(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    base = me.server.base_url
    commands = _commands(me.get("/dashboard", params={"session": "web-app", "agent": "claude.1"}).text)
    url_cc = f"{base}/mcp/v2/claude-code/{me.user_id}__session__web-app__claude.1"
    url_cursor = f"{base}/mcp/v2/cursor/{me.user_id}__session__web-app__claude.1"
    name = "--name engram-web-app-claude.1"
    assert commands == {
        "claude-code-key": (
            f"npx install-mcp '{url_cc}' --client claude-code --header '{PLACEHOLDER}' --oauth no --yes {name}"
        ),
        "cursor-key": (
            f"npx install-mcp '{url_cursor}' --client cursor --header '{PLACEHOLDER}' --oauth no --yes {name}"
        ),
        "claude-code-oauth": f"npx install-mcp '{url_cc}' --client claude-code --oauth yes --yes {name}",
        "cursor-oauth": f"npx install-mcp '{url_cursor}' --client cursor --oauth yes --yes {name}",
        "curl": (
            f"curl -s '{base}/v1/memories/search' -H 'Authorization: Bearer <your-key>' "
            "-H 'content-type: application/json' "
            """-d '{"query": "how do we paginate?", "session": "web-app", "agent": "claude.1"}'"""
        ),
    }
    assert 'data-copy="cmd-curl"' in me.get("/dashboard").text


def test_the_install_panel_shows_a_bad_name_next_to_its_field(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.get("/dashboard", params={"session": "my__project", "agent": "ok"})
    assert response.status_code == 400
    assert field_error(response.text, "session") == "session name 'my__project' must not contain '__'"
    assert field_error(response.text, "agent") is None
    assert _commands(response.text) == {}
    response = me.get("/dashboard", params={"session": "ok", "agent": "no spaces"})
    assert response.status_code == 400
    assert "may only contain" in (field_error(response.text, "agent") or "")
    response = me.get("/dashboard", params={"session": "", "agent": "x" * 65})
    assert field_error(response.text, "session") == "session name is empty"
    assert "longer than 64" in (field_error(response.text, "agent") or "")


def test_creating_a_key_keeps_the_panels_session_and_agent(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="ci", scope="write", session="api", agent="bot")
    assert response.headers["location"] == "/dashboard?session=api&agent=bot#new-key"
    page = me.follow(response)
    key = new_key_of(page)
    assert _commands(page.text)["cursor-key"].endswith(
        f"/mcp/v2/cursor/{me.user_id}__session__api__bot' --client cursor --header 'Authorization: Bearer {key}' "
        "--oauth no --yes --name engram-api-bot"
    )


def test_a_bad_session_riding_along_does_not_spoil_a_new_key(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="ci", scope="write", session="a__b", agent="bot")
    assert response.status_code == 303
    page = me.follow(response)
    key = new_key_of(page)
    # The commands are there, with the panel's defaults, so the key shown once can be used at once.
    assert f"Authorization: Bearer {key}" in _commands(page.text)["cursor-key"]


def test_a_key_name_the_database_cannot_store_is_an_error_next_to_the_field(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="a\x00b", scope="write")
    assert response.status_code == 422
    assert "NUL" in (field_error(response.text, "name") or "")
    assert _key_rows(me.get("/dashboard").text) == []


def test_pages_are_never_cached_or_framed(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    for response in (me.get("/dashboard"), me.get("/dashboard/memories"), browser().get("/login")):
        headers = response.headers
        assert headers["cache-control"] == "no-store"
        assert headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_a_new_key_reaches_only_the_browser_session_that_made_it(browser: Callable[[], Browser]) -> None:
    me, other = browser().signup(), browser().signup()
    response = me.submit("/dashboard", "/dashboard/keys", name="laptop", scope="write")
    flash = response.cookies.get("engram_flash")
    assert flash and "egk_" not in flash  # encrypted, never the key itself
    # Another logged-in browser holding that cookie sees nothing: it is bound to the session that made it.
    other.http.cookies.set("engram_flash", flash)
    page = other.get("/dashboard")
    assert page.status_code == 200 and 'id="cmd-new-key"' not in page.text
    assert '<section class="card notice" id="new-key" hidden>' in page.text
    # A tampered cookie shows nothing either, and the page still works.
    me.http.cookies.set("engram_flash", flash[:-4] + "AAAA")
    page = me.get("/dashboard")
    assert page.status_code == 200 and 'id="cmd-new-key"' not in page.text
    # The genuine one, in the browser that made the key, shows it.
    me.http.cookies.set("engram_flash", flash)
    assert new_key_of(me.get("/dashboard")).startswith("egk_")


def test_reloading_the_page_after_creating_a_key_creates_no_second_one(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    page = me.follow(me.submit("/dashboard", "/dashboard/keys", name="laptop", scope="write"))
    assert page.status_code == 200
    # A reload repeats the GET the redirect led to, not the POST.
    for _ in range(2):
        assert me.get(str(page.request.url)).status_code == 200
    assert len(_key_rows(me.get("/dashboard").text)) == 1
