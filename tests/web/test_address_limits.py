"""Limits per client address on what anyone may call without a credential: sign-up, OAuth registration, tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.harness import RunningServer, make_account
from tests.web.conftest import Browser, new_address, new_email

SIGNUPS, REGISTRATIONS, TOKEN_FAILURES = 3, 2, 3
CLIENT = {
    "client_name": "limited",
    "redirect_uris": ["http://127.0.0.1:8765/callback"],
    "token_endpoint_auth_method": "none",
}


@pytest.fixture(scope="module")
def limited(
    pg_database_url: str, redis_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server with small limits, counting in Redis as a deployment would."""
    from tests.conftest import _settings
    from tests.harness import serve

    settings = _settings(
        tmp_path_factory.mktemp("limited"),
        pg_database_url,
        redis_url=redis_url,
        signups_per_hour=SIGNUPS,
        client_registrations_per_hour=REGISTRATIONS,
        token_failures_per_5_minutes=TOKEN_FAILURES,
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def http_from(server: RunningServer, address: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"X-Forwarded-For": address}, timeout=30)


@pytest.mark.redis
def test_signups_from_one_address_are_limited_and_the_refused_one_creates_nothing(limited: RunningServer) -> None:
    address, email = new_address(), new_email()

    def attempt(email: str, password: str = "a long enough password") -> httpx.Response:
        return Browser(limited, address=address).submit("/signup", "/signup", email=email, password=password)

    statuses = [attempt(email).status_code]
    # A refused sign-up counts too (it would tell whether an email is taken).
    statuses += [attempt(email, "x").status_code for _ in range(SIGNUPS - 1)]
    refused_email = new_email()
    refused = attempt(refused_email)
    assert statuses[0] == 303 and all(s in (400, 422) for s in statuses[1:]), statuses
    assert refused.status_code == 429 and 3000 < int(refused.headers["Retry-After"]) <= 3600
    assert "too many sign-ups from this address" in refused.text and 'value="' + refused_email in refused.text

    # Nothing was created: that email can still sign up, from another address.
    Browser(limited).signup(refused_email)


@pytest.mark.redis
def test_client_registrations_per_address_count_only_what_was_created(limited: RunningServer) -> None:
    with http_from(limited, new_address()) as http:
        bad = http.post("/oauth/register", json={**CLIENT, "redirect_uris": ["http://evil.example/cb"]})
        assert bad.status_code == 400
        created = [http.post("/oauth/register", json=CLIENT).status_code for _ in range(REGISTRATIONS)]
        assert created == [201] * REGISTRATIONS
        refused = http.post("/oauth/register", json=CLIENT)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 3000
        assert refused.json()["error"]["code"] == "rate_limited"
    with http_from(limited, new_address()) as elsewhere:
        assert elsewhere.post("/oauth/register", json=CLIENT).status_code == 201


@pytest.mark.redis
def test_failed_token_requests_per_address_are_limited_but_successes_are_not(limited: RunningServer) -> None:
    owner = make_account(limited)
    address = new_address()
    with http_from(limited, address) as http:
        machine: dict[str, Any] = http.post(
            "/oauth/register",
            json={"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"},
            headers={"Authorization": f"Bearer {owner.key}"},
        ).json()
        good = (machine["client_id"], machine["client_secret"])
        for _ in range(TOKEN_FAILURES + 2):
            assert http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=good).status_code == 200
        guess = {"grant_type": "authorization_code", "code": "guess", "client_id": "x"}
        for _ in range(TOKEN_FAILURES):
            wrong = http.post("/oauth/token", data=guess)
            assert wrong.status_code in (400, 401)
        blocked = http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=good)
        assert blocked.status_code == 429 and 0 < int(blocked.headers["Retry-After"]) <= 300
    with http_from(limited, new_address()) as elsewhere:
        assert elsewhere.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=good).status_code == 200
