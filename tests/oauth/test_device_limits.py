"""The device flow's limits (RFC 8628 section 5.1): wrong user codes per person and per address, device
authorization requests per address; a device polling while its person decides is not failing.

Every request comes from an address of its own (X-Forwarded-For): the counts live in Redis, shared by every test
server and outliving the run, so 127.0.0.1's would depend on what ran before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.harness import RunningServer
from tests.oauth.conftest import register_device
from tests.web.conftest import Browser, new_address

CODE_FAILURES, DEVICE_REQUESTS, TOKEN_FAILURES = 3, 4, 2
# Well formed, but (with odds of one in 10^10 each) nobody's.
WRONG_CODES = ["BBBB-BBBB", "CCCC-CCCC", "DDDD-DDDD", "FFFF-FFFF"]


@pytest.fixture(scope="module")
def limited(
    pg_database_url: str, redis_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server with small limits, counting in Redis as a deployment would."""
    from tests.conftest import _settings
    from tests.harness import serve

    settings = _settings(
        tmp_path_factory.mktemp("device-limits"),
        pg_database_url,
        redis_url=redis_url,
        device_code_failures_per_15_minutes=CODE_FAILURES,
        device_authorizations_per_hour=DEVICE_REQUESTS,
        token_failures_per_5_minutes=TOKEN_FAILURES,
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def _from(server: RunningServer, address: str) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, headers={"X-Forwarded-For": address}, timeout=30)


def _device(server: RunningServer, address: str) -> tuple[str, dict[str, str]]:
    client = register_device(server)
    with _from(server, address) as http:
        started = http.post("/oauth/device_authorization", data={"client_id": client["client_id"]})
    assert started.status_code == 200, started.text
    return client["client_id"], started.json()


@pytest.mark.redis
def test_wrong_user_codes_are_limited_per_person_and_per_address(limited: RunningServer) -> None:
    _, flow = _device(limited, new_address())
    guesser = Browser(limited).signup()
    for code in WRONG_CODES[:CODE_FAILURES]:
        assert guesser.get("/device", params={"user_code": code}).status_code == 400
    blocked = guesser.get("/device", params={"user_code": flow["user_code"]})
    assert blocked.status_code == 429 and "too many wrong device codes" in blocked.text
    assert 0 < int(blocked.headers["Retry-After"]) <= 900
    posted = guesser.submit("/device", "/device", user_code=flow["user_code"], decision="approve")
    assert posted.status_code == 429

    # Another address does not help the same person; another person at that address is blocked too.
    guesser.http.headers["X-Forwarded-For"] = new_address()
    assert guesser.get("/device", params={"user_code": flow["user_code"]}).status_code == 429
    neighbour = Browser(limited, address=guesser.address).signup()
    assert neighbour.get("/device", params={"user_code": flow["user_code"]}).status_code == 429

    # Malformed codes are typing mistakes, not guesses, and someone else elsewhere is not affected.
    owner = Browser(limited).signup()
    for _ in range(CODE_FAILURES + 1):
        assert owner.get("/device", params={"user_code": "nope"}).status_code == 400
    assert owner.get("/device", params={"user_code": flow["user_code"]}).status_code == 200


@pytest.mark.redis
def test_device_authorization_requests_are_limited_per_address(limited: RunningServer) -> None:
    address = new_address()
    client = register_device(limited)
    with _from(limited, address) as http:
        answers = [http.post("/oauth/device_authorization", data={"client_id": client["client_id"]}) for _ in range(5)]
    assert [a.status_code for a in answers] == [200] * DEVICE_REQUESTS + [429], [a.text for a in answers]
    assert answers[-1].json()["error"] == "temporarily_unavailable" and "Retry-After" in answers[-1].headers
    with _from(limited, new_address()) as http:  # another address
        assert http.post("/oauth/device_authorization", data={"client_id": client["client_id"]}).status_code == 200


@pytest.mark.redis
def test_a_device_polling_while_its_person_decides_is_not_failing(limited: RunningServer) -> None:
    address = new_address()
    client_id, flow = _device(limited, address)
    with _from(limited, address) as http:
        data = {
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            "device_code": flow["device_code"],
            "client_id": client_id,
        }
        errors = [http.post("/oauth/token", data=data).json()["error"] for _ in range(TOKEN_FAILURES + 3)]
        assert set(errors) == {"authorization_pending", "slow_down"}, errors
        # A real failure still counts.
        wrong = {**data, "device_code": "wrong"}
        assert [http.post("/oauth/token", data=wrong).status_code for _ in range(TOKEN_FAILURES + 1)] == [400] * (
            TOKEN_FAILURES
        ) + [429]
    with _from(limited, new_address()) as http:  # another address: still pending
        assert http.post("/oauth/token", data=data).json()["error"] in ("authorization_pending", "slow_down")
