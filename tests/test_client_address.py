"""Whose word decides the client's address: a trusted proxy's, and nobody else's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.client_address import TrustedProxies, parse_networks
from tests.harness import RunningServer


def _client(trusted: str, peer: str, *headers: tuple[str, str], header: str | None = None) -> str | None:
    middleware = TrustedProxies(lambda *_: None, parse_networks(trusted), header)  # type: ignore[arg-type]
    return middleware.client_of(peer, [(k.lower().encode(), v.encode()) for k, v in headers])


def test_a_trusted_proxy_names_the_right_most_address_it_did_not_add_itself() -> None:
    # The client sent a made-up X-Forwarded-For; the proxy appended the real address after it.
    assert _client("10.0.0.0/8", "10.0.0.5", ("X-Forwarded-For", "6.6.6.6, 203.0.113.9")) == "203.0.113.9"
    # Proxies in a chain that are themselves trusted are skipped.
    assert _client("10.0.0.0/8", "10.0.0.5", ("X-Forwarded-For", "203.0.113.9, 10.1.2.3")) == "203.0.113.9"
    assert _client("10.0.0.0/8", "10.0.0.5", ("X-Forwarded-For", "[2001:db8::1]:443")) == "2001:db8::1"


def test_anyone_else_s_forwarded_headers_are_ignored() -> None:
    assert _client("10.0.0.0/8", "198.51.100.7", ("X-Forwarded-For", "203.0.113.9")) is None
    assert _client("10.0.0.0/8", "198.51.100.7", ("Fly-Client-IP", "203.0.113.9"), header="Fly-Client-IP") is None


def test_the_client_ip_header_wins_and_garbage_is_believed_nowhere() -> None:
    both = (("X-Forwarded-For", "6.6.6.6, 198.18.0.1"), ("Fly-Client-IP", "203.0.113.9"))
    assert _client("172.16.0.0/16", "172.16.3.4", *both, header="Fly-Client-IP") == "203.0.113.9"
    assert _client("127.0.0.1", "127.0.0.1", ("X-Forwarded-For", "not-an-ip, 203.0.113.9, bogus")) is None


def test_a_bad_trusted_proxy_entry_fails_at_start_naming_it() -> None:
    from app.settings import Settings

    with pytest.raises(ValueError, match=r"'10\.0\.0\.300' is not an IP address or network"):
        Settings(trusted_proxies="127.0.0.1, 10.0.0.300")


@pytest.fixture(scope="module")
def untrusting(
    pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server that trusts only a proxy at 10.9.9.9: requests from 127.0.0.1 cannot name another client."""
    from tests.conftest import _settings
    from tests.harness import serve

    settings = _settings(tmp_path_factory.mktemp("untrusting"), pg_database_url, signups_per_hour=2)
    settings.trusted_proxies = "10.9.9.9"
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


def test_x_forwarded_for_from_an_untrusted_peer_cannot_dodge_a_per_address_limit(untrusting: RunningServer) -> None:
    from tests.web.conftest import new_address, new_email

    def signup() -> int:
        with httpx.Client(base_url=untrusting.base_url, timeout=30) as http:
            page = http.get("/signup", headers={"X-Forwarded-For": new_address()})
            csrf = page.text.split('name="_csrf" value="', 1)[1].split('"', 1)[0]
            form = {"_csrf": csrf, "email": new_email(), "password": "a long enough password"}
            return http.post("/signup", data=form, headers={"X-Forwarded-For": new_address()}).status_code

    # Each attempt claims to come from a new address; all of them come from 127.0.0.1, and count as such.
    assert [signup() for _ in range(3)][-1] == 429
