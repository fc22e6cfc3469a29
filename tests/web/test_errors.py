"""Errors on pages are HTML pages; no input makes any page answer 500."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.web.conftest import Browser


def test_a_missing_page_is_an_html_404_page(browser: Callable[[], Browser]) -> None:
    me = browser()
    for path in ("/dashboard/nope", "/nope", "/login/extra"):
        response = me.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert "Page not found" in response.text and "<!doctype html>" in response.text
    # Programs still get JSON.
    api = me.http.get("/v1/nope", headers={"Accept": "*/*"})
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    assert me.http.get("/nope", headers={"Accept": "application/json"}).json()["error"]["code"] == "not_found"


def test_a_wrong_method_is_an_html_page(browser: Callable[[], Browser]) -> None:
    response = browser().get("/logout")
    assert response.status_code == 405 and "text/html" in response.headers["content-type"]


JUNK_STRINGS = [
    "",
    "x" * 10_000,
    "\x00",
    "a\x00b@example.com",
    "%",
    "ü🙂",
    "' OR 1=1 --",
    "../../etc/passwd",
    "a__b",
    "<script>",
    "\r\n",
]
PAGES = ["/", "/signup", "/login", "/dashboard", "/dashboard/memories", "/dashboard/sessions"]
FORMS = [
    "/signup",
    "/login",
    "/logout",
    "/dashboard/keys",
    "/dashboard/keys/{junk}/revoke",
    "/dashboard/apps/{junk}/revoke",
    "/dashboard/memories/{junk}/delete",
]


@pytest.mark.parametrize("logged_in", [False, True])
def test_no_page_answers_500_to_junk(browser: Callable[[], Browser], logged_in: bool) -> None:
    me = browser()
    if logged_in:
        me.signup()
    token = me.csrf("/dashboard" if logged_in else "/login")
    failures = []
    for page, junk in itertools.product(PAGES, JUNK_STRINGS):
        params = {name: junk[:5000] for name in ("q", "session", "agent", "scope", "tag", "cursor", "next")}
        response = me.get(page, params=params)
        if response.status_code >= 500:
            failures.append(("GET", page, junk, response.status_code))
    for form, junk in itertools.product(FORMS, JUNK_STRINGS):
        path = form.format(junk=quote(junk[:3000], safe="") or "x")
        fields = {
            "_csrf": token,
            "email": junk,
            "password": junk,
            "name": junk,
            "scope": junk,
            "next": junk,
            "back": junk,
        }
        for kwargs in (
            {"data": fields},
            {"content": junk.encode(), "headers": {"content-type": "application/x-www-form-urlencoded"}},
            {"content": b"\xff\xfe" + junk.encode(), "headers": {"content-type": "multipart/form-data"}},
            {"json": fields},
        ):
            response = me.http.post(path, **kwargs)  # type: ignore[arg-type]
            if response.status_code >= 500:
                failures.append(("POST", path, junk, response.status_code))
    for path in (
        "/dashboard/sessions/%00",
        "/dashboard/sessions/" + "x" * 3000,
        "/static/../app/main.py",
        "/static/nope.css",
    ):
        response = me.get(path)
        if response.status_code >= 500:
            failures.append(("GET", path, "", response.status_code))
    assert failures == []


def test_a_too_large_form_is_an_html_413(browser: Callable[[], Browser]) -> None:
    me = browser()
    response = me.post("/login", {"_csrf": me.csrf("/login"), "email": "x" * 200_000})
    assert response.status_code == 413 and "text/html" in response.headers["content-type"]
