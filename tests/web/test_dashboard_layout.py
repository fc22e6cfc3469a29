"""The main page puts a newcomer's three steps first (key, install, test connection); sync has its own page."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable

from tests.web.conftest import Browser, field_error, new_key_of


def _result(html: str) -> str:
    match = re.search(r'<div class="result (ok|failed)" id="connection-result" role="status">(.*?)</div>', html, re.S)
    assert match, html
    text = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", match.group(2))).split())
    return match.group(1) + ": " + text


def test_the_main_page_starts_with_key_install_and_test(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    page = me.get("/dashboard").text
    order = [page.index(f'id="{section}"') for section in ("keys", "install", "test", "apps")]
    assert order == sorted(order)
    assert 'id="link-machine"' not in page and 'id="machines"' not in page and 'id="clients"' not in page
    for link in ("/dashboard/sync", "/account/export", "/account/delete", "/dashboard/usage"):
        assert f'href="{link}"' in page
    sync = me.get("/dashboard/sync")
    assert sync.status_code == 200
    assert all(f'id="{s}"' in sync.text for s in ("link-machine", "clients", "machines"))


def test_test_connection_makes_a_real_mcp_call_with_the_key(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    key = me.create_key()
    answer = me.submit("/dashboard", "/dashboard/test-connection", key=key, session="web", agent="claude")
    assert answer.status_code == 200, answer.text
    result = _result(answer.text)
    assert result.startswith("ok: Connected: the key works and") and "search_memory" in result, result
    assert f"/mcp/v2/dashboard-test/{me.user_id}" in result
    # The install panel keeps the names it was built with.
    assert 'name="session" value="web"' in answer.text

    # A key that is not (or no longer) valid is reported as refused, by the server's own answer.
    refused = _result(me.submit("/dashboard", "/dashboard/test-connection", key=key[:-3] + "xyz").text)
    assert refused.startswith("failed: Not connected: the server refused the key (HTTP 401)"), refused
    key_id = re.search(r'data-key-id="([^"]+)"', me.get("/dashboard").text).group(1)  # type: ignore[union-attr]
    assert me.submit("/dashboard", f"/dashboard/keys/{key_id}/revoke").status_code == 303
    revoked = _result(me.submit("/dashboard", "/dashboard/test-connection", key=key).text)
    assert revoked.startswith("failed: Not connected: the server refused the key"), revoked

    # Another user's key does not pass for this user's, and the page says why in the server's words.
    other = browser().signup()
    theirs = _result(me.submit("/dashboard", "/dashboard/test-connection", key=other.create_key()).text)
    assert theirs.startswith("failed: Not connected: the server refused the key (HTTP 403)"), theirs
    assert "belongs to another user" in theirs, theirs


def test_a_key_bound_by_its_checkbox_is_tested_on_its_own_session_url(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    created = me.submit(
        "/dashboard", "/dashboard/keys", name="bound", scope="write", session="web", agent="claude", bind="on"
    )
    key = new_key_of(me.follow(created))
    answer = _result(me.submit("/dashboard", "/dashboard/test-connection", key=key, session="web", agent="claude").text)
    assert answer.startswith("ok: Connected: the key works on its own session URL"), answer
    assert f"/mcp/v2/dashboard-test/{me.user_id}__session__web__claude" in answer
    assert "claim_files" in answer  # the session's coordination tools, as the installed agent sees them

    # Tested with other names on the page, it still connects where it can, and says which names to install it with.
    elsewhere = _result(me.submit("/dashboard", "/dashboard/test-connection", key=key, session="api", agent="x").text)
    assert elsewhere.startswith("ok: Connected"), elsewhere
    assert "bound to session web and agent claude: install it with those names" in elsewhere


def test_test_connection_refuses_bad_input_and_forged_forms(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    empty = me.submit("/dashboard", "/dashboard/test-connection", key="  ")
    assert empty.status_code == 422 and field_error(empty.text, "key") == "paste an API key to test (create one above)"
    junk = me.submit("/dashboard", "/dashboard/test-connection", key="egk_\u00e9\u00e9")
    assert junk.status_code == 422 and "that is not an API key" in (field_error(junk.text, "key") or "")
    assert me.post("/dashboard/test-connection", {"_csrf": "forged", "key": "egk_x"}).status_code == 403
