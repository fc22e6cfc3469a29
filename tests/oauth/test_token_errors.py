"""Every refusal at the token, revocation and introspection endpoints has the RFC 6749 section 5.2 shape:
``{"error": "...", "error_description": "..."}``, never Engram's own ``{"error": {"code": ...}}``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer
from tests.oauth.conftest import REDIRECT, token_request
from tests.web.conftest import Browser

TokensFor = Callable[..., dict[str, Any]]
TOKEN_FAILURES = 2
_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _rfc6749_error(response: httpx.Response, error: str, status: int = 400) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error, body
    description: str = body["error_description"]
    return description


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke", "/oauth/introspect"])
def test_a_body_that_is_not_form_encoded_is_invalid_request(api: RunningServer, path: str) -> None:
    with api.client() as http:
        as_json = http.post(path, json={"grant_type": "client_credentials", "token": "x"})
        multipart = http.post(
            path,
            content=b"--b\r\nContent-Disposition: form-data; name=grant_type\r\n\r\nclient_cre",
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )
    for response in (as_json, multipart):
        assert "application/x-www-form-urlencoded" in _rfc6749_error(response, "invalid_request")


def test_a_form_with_a_charset_is_still_a_form(api: RunningServer) -> None:
    with api.client() as http:
        response = http.post(
            "/oauth/token",
            content=b"grant_type=authorization_code&code=x&client_id=egc_nope",
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"},
        )
    assert response.status_code in (400, 401) and response.json()["error"] == "invalid_client", response.text


def test_a_repeated_parameter_is_invalid_request(api: RunningServer, user: Browser, tokens_for: TokensFor) -> None:
    """RFC 6749 section 3.2: request and response parameters must not be included more than once."""
    issued = tokens_for(user)
    twice = [
        ("grant_type", "authorization_code"),
        ("code", "one"),
        ("code", "two"),
        ("redirect_uri", REDIRECT),
        ("client_id", issued["client_id"]),
    ]
    with api.client() as http:
        token = http.post("/oauth/token", content=str(httpx.QueryParams(twice)), headers=_FORM)
        revoke = http.post(
            "/oauth/revoke",
            content=str(httpx.QueryParams([("token", issued["access_token"]), ("token", "x")])),
            headers=_FORM,
        )
    assert "'code'" in _rfc6749_error(token, "invalid_request")
    assert "'token'" in _rfc6749_error(revoke, "invalid_request")


@pytest.fixture(scope="module")
def limited(
    pg_database_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server that allows few failed token requests per address (counted in the process)."""
    from tests.conftest import _settings
    from tests.harness import serve

    settings = _settings(
        tmp_path_factory.mktemp("token-limit"), pg_database_url, token_failures_per_5_minutes=TOKEN_FAILURES
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_the_failed_request_limit_answers_in_the_token_endpoint_shape(limited: RunningServer) -> None:
    guess = {"grant_type": "authorization_code", "code": "guess", "client_id": "egc_nope", "redirect_uri": REDIRECT}
    for _ in range(TOKEN_FAILURES):
        assert token_request(limited, guess).status_code in (400, 401)
    blocked = token_request(limited, guess)
    description = _rfc6749_error(blocked, "temporarily_unavailable", status=429)
    assert "too many failed token requests" in description
    assert 0 < int(blocked.headers["Retry-After"]) <= 300


def test_nul_characters_in_oauth_requests_are_refused_never_a_500(api: RunningServer, user: Browser) -> None:
    # PostgreSQL cannot take NUL in text; these lookups used to crash on it.
    responses = [
        token_request(api, {"grant_type": "authorization_code", "client_id": "egc_\x00", "code": "x\x00"}),
        token_request(api, {"grant_type": "client_credentials"}, auth=("egc_\x00", "secret")),
        httpx.post(f"{api.base_url}/oauth/revoke", data={"token": "a\x00b", "client_id": "egc_\x00"}),
        httpx.post(f"{api.base_url}/oauth/introspect", data={"token": "a\x00b"}),
        user.get("/oauth/authorize", params={"client_id": "egc_\x00", "response_type": "code"}),
    ]
    for response in responses:
        assert 400 <= response.status_code < 500, response.text
