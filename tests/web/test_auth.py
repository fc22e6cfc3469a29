"""Signup, login, logout and the session cookie, over real HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.harness import RunningServer, make_account
from tests.web.conftest import PASSWORD, Browser, field_error, form_error, new_email


def test_signup_logs_the_new_user_in(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    page = me.get("/dashboard")
    assert page.status_code == 200
    assert me.email in page.text and "Log out" in page.text


def test_signup_with_a_taken_email_shows_the_error_next_to_the_email(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    again = browser()
    response = again.submit("/signup", "/signup", email=email.upper(), password=PASSWORD)
    assert response.status_code == 400
    assert "already exists" in (field_error(response.text, "email") or "")
    assert f'value="{email.upper()}"' in response.text  # what was typed stays in the field
    assert "engram_session" not in response.headers.get("set-cookie", "")


def test_signup_with_a_weak_password_shows_the_error_next_to_the_password(browser: Callable[[], Browser]) -> None:
    for weak in ("short", "password123", "aaaaaaaaaaaaaa"):
        response = browser().submit("/signup", "/signup", email=new_email(), password=weak)
        assert response.status_code == 422, weak
        assert field_error(response.text, "password"), weak
        assert PASSWORD not in response.text and f'value="{weak}"' not in response.text


def test_signup_with_a_bad_email_shows_the_error_next_to_the_email(browser: Callable[[], Browser]) -> None:
    response = browser().submit("/signup", "/signup", email="not-an-email", password=PASSWORD)
    assert response.status_code == 422
    assert "not a valid email" in (field_error(response.text, "email") or "")


def test_login_with_the_right_password_opens_a_session(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    me = browser()
    response = me.submit("/login", "/login", email=email, password=PASSWORD, next="/dashboard/memories?tag=x")
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/memories?tag=x"
    assert me.get("/dashboard").status_code == 200


def test_login_with_a_wrong_password_or_unknown_email_fails_alike(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    me = browser()
    wrong = me.submit("/login", "/login", email=email, password=PASSWORD + "x")
    unknown = me.submit("/login", "/login", email=new_email(), password=PASSWORD)
    for response in (wrong, unknown):
        assert response.status_code == 400
        assert form_error(response.text) == "the email or the password is wrong"
        assert "engram_session" not in response.headers.get("set-cookie", "")
    assert me.get("/dashboard").status_code == 303


def test_login_never_redirects_to_another_site(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    for target in ("//evil.example", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        response = browser().submit("/login", "/login", email=email, password=PASSWORD, next=target)
        assert response.status_code == 303
        assert response.headers["location"] == "/dashboard", target


def test_pages_that_need_a_login_redirect_to_it_and_come_back(browser: Callable[[], Browser]) -> None:
    response = browser().get("/dashboard/memories?session=a&tag=b")
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fdashboard%2Fmemories%3Fsession%3Da%26tag%3Db"
    login = browser().get(response.headers["location"])
    assert 'name="next" value="/dashboard/memories?session=a&amp;tag=b"' in login.text


def test_five_failed_logins_for_one_email_answer_429(browser: Callable[[], Browser]) -> None:
    email = new_email()
    browser().signup(email)
    # From five different addresses: the per-email limit alone must stop them.
    for _ in range(5):
        assert browser().submit("/login", "/login", email=email, password="wrong password!").status_code == 400
    blocked = browser().submit("/login", "/login", email=email, password=PASSWORD)
    assert blocked.status_code == 429
    message = form_error(blocked.text) or ""
    assert re.fullmatch(r"too many attempts, try again in \d+ s", message), message
    assert 0 < int(blocked.headers["retry-after"]) <= 300
    assert "engram_session" not in blocked.headers.get("set-cookie", "")


def test_twenty_failed_logins_from_one_address_answer_429(browser: Callable[[], Browser]) -> None:
    attacker = browser()
    for _ in range(20):
        assert attacker.submit("/login", "/login", email=new_email(), password="guess guess guess").status_code == 400
    email = new_email()
    browser().signup(email)
    assert attacker.submit("/login", "/login", email=email, password=PASSWORD).status_code == 429
    # Someone else, from another address, still gets in.
    assert browser().submit("/login", "/login", email=email, password=PASSWORD).status_code == 303


def test_logout_ends_the_session_on_the_server(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    cookie = me.http.cookies["engram_session"]
    response = me.submit("/dashboard", "/logout")
    assert response.status_code == 303 and response.headers["location"] == "/"
    assert 'engram_session=""' in response.headers["set-cookie"] or "Max-Age=0" in response.headers["set-cookie"]
    replay = browser()
    replay.http.cookies.set("engram_session", cookie)
    assert replay.get("/dashboard").status_code == 303


def test_cookies_are_httponly_and_samesite_lax(browser: Callable[[], Browser]) -> None:
    me = browser()
    page = me.get("/signup")
    prelogin = page.headers["set-cookie"]
    assert prelogin.startswith("engram_csrf=")
    token = re.search(r'name="_csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    response = me.post("/signup", {"_csrf": token, "email": new_email(), "password": PASSWORD})
    session = response.headers["set-cookie"]
    for cookie in (prelogin, session):
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert "httponly" in flags and "samesite=lax" in flags and "path=/" in flags
        # Served on http://127.0.0.1, so not Secure (a browser would drop a Secure cookie over http).
        assert "secure" not in flags
    assert session.startswith("engram_session=") and "max-age=604800" in session.lower()


def test_cookies_are_secure_when_the_public_url_is_https(https_api: RunningServer) -> None:
    me = Browser(https_api)
    try:
        cookie = me.get("/login").headers["set-cookie"]
        assert "secure" in {part.strip().lower() for part in cookie.split(";")}
    finally:
        me.close()


def test_a_user_the_cli_created_logs_in_once_the_cli_gives_them_a_password(
    browser: Callable[[], Browser], api: RunningServer
) -> None:
    email = new_email()
    user = make_account(api, email=email)
    me = browser()
    assert me.submit("/login", "/login", email=email, password=PASSWORD).status_code == 400  # no password yet

    def set_password(password: str) -> subprocess.CompletedProcess[str]:
        """``engram users set-password``, on the server's own database, with the password on stdin."""
        env = {
            **os.environ,
            "ENGRAM_DATABASE_URL": api.settings.database_url,
            "ENGRAM_DATA_DIR": str(api.settings.data_dir),
        }
        engram = str(Path(sys.executable).with_name("engram"))
        command = [engram, "users", "set-password", user.user_id]
        return subprocess.run(command, input=password + "\n", env=env, capture_output=True, text=True, timeout=120)

    weak = set_password("short")
    assert weak.returncode == 1 and "at least" in weak.stderr, weak.stderr
    done = set_password(PASSWORD)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and PASSWORD not in done.stderr

    assert me.submit("/login", "/login", email=email, password=PASSWORD).status_code == 303
    assert me.get("/dashboard").status_code == 200

    # A new password ends every browser session that the old one opened.
    again = set_password(PASSWORD + "-2")
    assert again.returncode == 0, again.stderr
    assert me.get("/dashboard").status_code == 303
