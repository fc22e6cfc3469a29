"""The pure rules: which resources a user may have tokens for, and which redirect URIs match."""

from __future__ import annotations

import pytest

from app.oauth import resources, scopes
from app.oauth.clients import redirect_uri_matches, redirect_uri_problem

BASE = "https://engram.example"


def test_an_mcp_url_belongs_to_the_user_in_it_including_virtual_ids() -> None:
    assert resources.allowed_for(BASE, f"{BASE}/mcp/v2/cursor/u_1", "u_1") is not None
    assert resources.allowed_for(BASE, f"{BASE}/mcp/v2/cursor/u_1__session__s__agent", "u_1") is not None
    assert resources.allowed_for(BASE, f"{BASE}/mcp/v2/cursor/u_2", "u_1") is None
    assert resources.allowed_for(BASE, f"{BASE}/v1", "u_1") == resources.Resource(f"{BASE}/v1", None)
    assert resources.allowed_for(BASE, "https://evil.example/v1", "u_1") is None
    assert resources.allowed_for(BASE, f"{BASE}/v1?x=1", "u_1") is None


def test_the_sync_resource_belongs_to_whoever_holds_the_token() -> None:
    sync = resources.allowed_for(BASE, f"{BASE}/sync/v1/", "u_1")
    assert sync == resources.Resource(f"{BASE}/sync/v1", None, sync=True)
    assert resources.parse(BASE, f"{BASE}/sync/v1/push") is None
    assert resources.parse(BASE, f"{BASE}/sync") is None
    assert resources.metadata_url(f"{BASE}/sync/v1") == f"{BASE}/.well-known/oauth-protected-resource/sync/v1"


@pytest.mark.parametrize(
    ("requested", "client_scope", "sync", "granted"),
    [
        (None, None, False, "memories:read memories:write"),
        (None, None, True, None),  # a client without a scope never gets sync
        (None, "sync", True, "sync"),
        (None, "sync", False, None),
        ("memories:read sync", "memories:read sync", False, "memories:read"),
        ("memories:read sync", "memories:read sync", True, "sync"),
        ("memories:write", "memories:read", False, None),
        ("sync", "memories:read memories:write", True, None),
    ],
)
def test_scopes_granted_on_a_resource_are_that_resources_only(
    requested: str | None, client_scope: str | None, sync: bool, granted: str | None
) -> None:
    assert scopes.grantable(requested, client_scope, sync) == granted


def test_a_principal_gets_the_scopes_of_the_resource_it_acts_on() -> None:
    assert scopes.principal_scopes("sync", sync=True) == frozenset({"sync"})
    assert scopes.principal_scopes("sync", sync=False) == frozenset()
    assert scopes.principal_scopes("memories:write", sync=True) == frozenset()
    assert scopes.principal_scopes("memories:write sync", sync=False) == frozenset({"read", "write"})


def test_percent_encoding_is_canonical() -> None:
    a = resources.parse(BASE, f"{BASE}/mcp/v2/claude%20code/u_1/")
    b = resources.parse(BASE, f"{BASE}/mcp/v2/claude code/u_1")
    assert a == b and a is not None and a.url == f"{BASE}/mcp/v2/claude%20code/u_1"


def test_metadata_url_inserts_the_well_known_path() -> None:
    assert resources.metadata_url(f"{BASE}/mcp/v2/c/u_1") == f"{BASE}/.well-known/oauth-protected-resource/mcp/v2/c/u_1"


@pytest.mark.parametrize(
    ("registered", "requested", "matches"),
    [
        ("https://app.example/cb", "https://app.example/cb", True),
        ("https://app.example/cb", "https://app.example/cb/", False),
        ("https://app.example:443/cb", "https://app.example:444/cb", False),
        ("http://127.0.0.1:3334/cb", "http://127.0.0.1:9999/cb", True),
        ("http://localhost/cb", "http://localhost:51234/cb", True),
        ("http://[::1]:1/cb", "http://[::1]:2/cb", True),
        ("http://127.0.0.1:3334/cb", "http://localhost:3334/cb", False),
        ("http://127.0.0.1:3334/cb", "http://127.0.0.1:9999/other", False),
    ],
)
def test_redirect_uris_match_exactly_except_loopback_ports(registered: str, requested: str, matches: bool) -> None:
    assert redirect_uri_matches(registered, requested) is matches


def test_redirect_uri_rules() -> None:
    assert redirect_uri_problem("https://app.example/cb") is None
    assert redirect_uri_problem("http://localhost:3334/oauth/callback") is None
    assert redirect_uri_problem("cursor.app://callback") is None
    assert redirect_uri_problem("http://app.example/cb") is not None
    assert redirect_uri_problem("https://app.example/cb#x") is not None
    assert redirect_uri_problem("javascript://x") is not None
