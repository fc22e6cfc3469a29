"""Every form refuses a missing or wrong CSRF token with 403, and changes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.web.conftest import PASSWORD, Browser, new_email

BAD_TOKENS = [None, "", "wrong-token", "A" * 5000]


def _post(me: Browser, action: str, token: str | None, **fields: str) -> int:
    data = dict(fields)
    if token is not None:
        data["_csrf"] = token
    response = me.post(action, data)
    if response.status_code == 403:
        assert "text/html" in response.headers["content-type"]
        assert "did not come from this site" in response.text
    return response.status_code


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_signup_without_the_right_token_creates_nobody(browser: Callable[[], Browser], token: str | None) -> None:
    me = browser()
    me.get("/signup")
    email = new_email()
    assert _post(me, "/signup", token, email=email, password=PASSWORD) == 403
    browser().signup(email)  # the email is still free


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_login_without_the_right_token_opens_no_session(browser: Callable[[], Browser], token: str | None) -> None:
    email = new_email()
    browser().signup(email)
    me = browser()
    me.get("/login")
    assert _post(me, "/login", token, email=email, password=PASSWORD) == 403
    assert "engram_session" not in me.http.cookies


def test_a_token_signed_for_another_browser_is_refused(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    attacker, victim = browser(), browser()
    token = attacker.csrf("/login")
    victim.get("/login")
    assert _post(victim, "/login", token, email=email, password=PASSWORD) == 403
    # A browser that never loaded a form has no cookie to match at all.
    assert _post(browser(), "/login", token, email=email, password=PASSWORD) == 403


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_logout_without_the_right_token_keeps_the_session(browser: Callable[[], Browser], token: str | None) -> None:
    me = browser().signup()
    assert _post(me, "/logout", token) == 403
    assert me.get("/dashboard").status_code == 200


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_key_creation_without_the_right_token_creates_no_key(browser: Callable[[], Browser], token: str | None) -> None:
    me = browser().signup()
    before = me.get("/dashboard").text.count("data-key-id=")
    assert _post(me, "/dashboard/keys", token, name="sneaky", scope="write") == 403
    assert me.get("/dashboard").text.count("data-key-id=") == before


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_revoking_without_the_right_token_keeps_the_key(browser: Callable[[], Browser], token: str | None) -> None:
    me = browser().signup()
    key = me.create_key()
    key_id = re.search(r'data-key-id="([^"]+)"', me.get("/dashboard").text).group(1)  # type: ignore[union-attr]
    assert _post(me, f"/dashboard/keys/{key_id}/revoke", token) == 403
    with me.api(key) as api:
        assert api.get("/v1/memories").status_code == 200


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_deleting_a_memory_without_the_right_token_keeps_it(browser: Callable[[], Browser], token: str | None) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        memory = api.post("/v1/memories", json={"content": "keep me"}).json()
        assert _post(me, f"/dashboard/memories/{memory['id']}/delete", token) == 403
        assert api.get(f"/v1/memories/{memory['id']}").status_code == 200


def test_another_users_session_token_is_refused(browser: Callable[[], Browser]) -> None:
    me, other = browser().signup(), browser().signup()
    assert _post(me, "/dashboard/keys", other.csrf(), name="x", scope="read") == 403
    # And the pre-login token of the same browser does not count once logged in.
    anonymous_token = browser().csrf("/login")
    assert _post(me, "/logout", anonymous_token) == 403
