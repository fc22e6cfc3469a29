"""The sync scope and the sync resource: `engram sync clients create`, client_credentials tokens for {base}/sync/v1,
and the binding every way round (a sync token nowhere else, nothing else on the sync resource)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.accounts.principal import Principal
from app.errors import Forbidden, Unauthorized
from tests.harness import RunningServer, make_account
from tests.oauth.conftest import (
    authenticate,
    authorize_params,
    expire_access_token,
    make_sync_client,
    mcp_resource,
    mcp_status,
    new_pkce,
    redirect_query,
    register,
    set_token_scope,
    sync_resource,
    sync_token,
    token_request,
)
from tests.web.conftest import Browser

ENGRAM = str(Path(sys.executable).with_name("engram"))


def _engram(api: RunningServer, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "ENGRAM_DATABASE_URL": api.settings.resolved_database_url,
        "ENGRAM_DATA_DIR": str(tmp_path),
        "ENGRAM_SECRET_KEY": api.settings.secret_key or "",
        "MEM0_TELEMETRY": "False",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def _issued(api: RunningServer, client: dict[str, str], **extra: str) -> dict[str, Any]:
    response = sync_token(api, client, **extra)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_sync_clients_create_prints_one_json_object_whose_client_gets_sync_tokens(
    api: RunningServer, tmp_path: Path
) -> None:
    owner = make_account(api)
    made = _engram(api, tmp_path, "sync", "clients", "create", owner.user_id, "--name", "ci box")
    assert made.returncode == 0, made.stderr
    client = json.loads(made.stdout)
    assert made.stdout == json.dumps(client) + "\n"
    assert set(client) == {"client_id", "client_secret"}

    issued = _issued(api, client)
    assert issued["scope"] == "sync" and issued["token_type"] == "Bearer"
    assert "refresh_token" not in issued
    with api.client() as http:
        seen = http.post(
            "/oauth/introspect",
            data={"token": issued["access_token"]},
            auth=(client["client_id"], client["client_secret"]),
        ).json()
    assert seen["active"] and seen["aud"] == sync_resource(api) and seen["sub"] == owner.user_id

    principal = authenticate(api, issued["access_token"], sync_resource(api))
    assert isinstance(principal, Principal), principal
    assert principal.user_id == owner.user_id and principal.scopes == frozenset({"sync"})
    assert principal.via == "oauth" and principal.key_id and principal.key_id.startswith("fam_")
    assert not principal.can_write

    # It is a machine client like any other: listed and revoked with `engram oauth clients`.
    listed = _engram(api, tmp_path, "oauth", "clients", "list", owner.user_id)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["client_id"], r["name"], r["scope"], r["status"]) for r in rows] == [
        (client["client_id"], "ci box", "sync", "active")
    ]
    revoked = _engram(api, tmp_path, "oauth", "clients", "revoke", client["client_id"])
    assert revoked.returncode == 0, revoked.stderr
    refused = authenticate(api, issued["access_token"], sync_resource(api))
    assert isinstance(refused, Unauthorized) and "revoked" in refused.message
    assert sync_token(api, client).json()["error"] == "invalid_client"


def test_sync_clients_create_refuses_bad_input_with_a_reason(api: RunningServer, tmp_path: Path) -> None:
    owner = make_account(api)
    unknown = _engram(api, tmp_path, "sync", "clients", "create", "u_nobody", "--name", "x")
    assert unknown.returncode == 1 and unknown.stdout == "" and "no user u_nobody" in unknown.stderr
    blank = _engram(api, tmp_path, "sync", "clients", "create", owner.user_id, "--name", "  ")
    assert blank.returncode == 1 and blank.stdout == "" and "name must be 1-100 characters" in blank.stderr
    control = _engram(api, tmp_path, "sync", "clients", "create", owner.user_id, "--name", "a\x1bb")
    assert control.returncode == 1 and "control characters" in control.stderr
    nameless = _engram(api, tmp_path, "sync", "clients", "create", owner.user_id)
    assert nameless.returncode == 2 and "--name" in nameless.stderr


def test_a_sync_token_is_refused_on_the_rest_api_and_on_mcp(api: RunningServer) -> None:
    owner = make_account(api)
    token = _issued(api, make_sync_client(api, owner.user_id))["access_token"]
    with api.client(token) as rest:
        on_api = rest.get("/v1/memories")
    assert on_api.status_code == 401, on_api.text
    assert f"is for {sync_resource(api)}" in on_api.json()["error"]["message"]
    assert 'error="invalid_token"' in on_api.headers["www-authenticate"]
    assert mcp_status(api, token, owner.user_id).status_code == 401
    assert isinstance(authenticate(api, token, f"{api.base_url}/v1"), Unauthorized)


def test_memories_tokens_and_api_keys_never_act_on_the_sync_resource(
    api: RunningServer, user: Browser, tokens_for: Any
) -> None:
    assert user.user_id is not None
    key = user.create_key("laptop")
    on_api = tokens_for(user, f"{api.base_url}/v1")["access_token"]
    on_mcp = tokens_for(user)["access_token"]
    metadata = f'resource_metadata="{api.base_url}/.well-known/oauth-protected-resource/sync/v1"'
    for credential in (on_api, on_mcp, key, "ego_not-a-token", "egk_nonsense"):
        refused = authenticate(api, credential, sync_resource(api))
        assert isinstance(refused, Unauthorized), (credential, refused)
        assert metadata in refused.headers["WWW-Authenticate"] and 'scope="sync"' in refused.headers["WWW-Authenticate"]
    assert "not an API key" in authenticate(api, key, sync_resource(api)).message
    assert f"is for {api.base_url}/v1" in authenticate(api, on_api, sync_resource(api)).message

    async def anonymous() -> Any:
        try:
            return await api.container.authenticator.authenticate({}, sync_resource(api))
        except Unauthorized as exc:
            return exc

    missing = api.run(anonymous())
    assert isinstance(missing, Unauthorized) and metadata in missing.headers["WWW-Authenticate"]
    # The same credentials still work where they belong.
    assert api.client(key).get("/v1/memories").status_code == 200
    assert api.client(on_api).get("/v1/memories").status_code == 200


def test_each_sync_token_acts_as_its_own_user_only(api: RunningServer) -> None:
    alice, bob = make_account(api), make_account(api)
    alice_token = _issued(api, make_sync_client(api, alice.user_id))["access_token"]
    bob_client = make_sync_client(api, bob.user_id)
    bob_token = _issued(api, bob_client)["access_token"]
    assert authenticate(api, alice_token, sync_resource(api)).user_id == alice.user_id
    assert authenticate(api, bob_token, sync_resource(api)).user_id == bob.user_id
    # Bob's client cannot aim at anything of Alice's.
    refused = sync_token(api, bob_client, resource=mcp_resource(api, alice.user_id))
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_target", refused.text


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"scope": "memories:read"}, "invalid_scope"),
        ({"scope": "sync memories:write"}, "invalid_scope"),
        ({"scope": "admin"}, "invalid_scope"),
        ({"resource": "/v1"}, "invalid_scope"),
        ({"resource": "https://elsewhere.example/sync/v1"}, "invalid_target"),
        ({"resource": "/sync/v1?x=1"}, "invalid_target"),
        ({"resource": "/sync/v2"}, "invalid_target"),
    ],
    ids=["memories-read", "sync-and-write", "unknown", "rest-api", "other-server", "query", "other-version"],
)
def test_a_sync_client_gets_sync_on_the_sync_resource_and_nothing_else(
    api: RunningServer, extra: dict[str, str], error: str
) -> None:
    client = make_sync_client(api, make_account(api).user_id)
    extra = {k: (api.base_url + v if v.startswith("/") else v) for k, v in extra.items()}
    refused = sync_token(api, client, **extra)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == error and refused.json()["error_description"], refused.text
    explicit = _issued(api, client, scope="sync", resource=sync_resource(api))
    assert explicit["scope"] == "sync"


def test_the_same_resource_twice_is_invalid_target(api: RunningServer) -> None:
    client = make_sync_client(api, make_account(api).user_id)
    data = [("grant_type", "client_credentials"), ("resource", sync_resource(api)), ("resource", sync_resource(api))]
    with api.client() as http:
        refused = http.post(
            "/oauth/token",
            content="&".join(f"{k}={v}" for k, v in data),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            auth=(client["client_id"], client["client_secret"]),
        )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_target", refused.text


def test_the_code_flow_never_reaches_the_sync_resource(api: RunningServer, user: Browser) -> None:
    client = register(api)
    params = authorize_params(client["client_id"], new_pkce(), sync_resource(api))
    refused = redirect_query(user.get("/oauth/authorize", params=params))
    assert refused["error"] == "invalid_target" and refused["state"] == "st-1"
    # A client that asks only for sync gets nothing on the REST API either.
    sync_only = register(api, scope="sync")
    params = authorize_params(sync_only["client_id"], new_pkce(), f"{api.base_url}/v1")
    assert redirect_query(user.get("/oauth/authorize", params=params))["error"] == "invalid_scope"


def test_an_api_key_cannot_register_a_sync_machine_client(api: RunningServer) -> None:
    owner = make_account(api)
    body = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic", "scope": "sync"}
    with api.client(owner.key) as http:
        refused = http.post("/oauth/register", json=body)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata", refused.text
    assert "engram sync clients create" in refused.json()["error_description"]
    # Without a scope a key's machine client gets the memories scopes, never sync.
    with api.client(owner.key) as http:
        plain = http.post("/oauth/register", json={**body, "scope": None}).json()
    assert sync_token(api, plain).json()["scope"] == "memories:read memories:write"
    refused_sync = sync_token(api, plain, resource=sync_resource(api))
    assert refused_sync.status_code == 400 and refused_sync.json()["error"] == "invalid_scope", refused_sync.text


def test_a_token_whose_scope_does_not_fit_its_resource_is_refused(
    api: RunningServer, user: Browser, tokens_for: Any
) -> None:
    """Tokens stored before these rules (or tampered with) are refused where they are used."""
    owner = make_account(api)
    on_sync = _issued(api, make_sync_client(api, owner.user_id))["access_token"]
    set_token_scope(api, on_sync, "memories:read memories:write")
    refused = authenticate(api, on_sync, sync_resource(api))
    assert isinstance(refused, Forbidden) and "sync scope" in refused.message
    assert 'error="insufficient_scope"' in refused.headers["WWW-Authenticate"]

    on_api = tokens_for(user, f"{api.base_url}/v1")["access_token"]
    set_token_scope(api, on_api, "sync")
    with api.client(on_api) as rest:
        forbidden = rest.get("/v1/memories")
    assert forbidden.status_code == 403, forbidden.text


def test_the_sync_resource_has_its_own_metadata(api: RunningServer) -> None:
    with api.client() as http:
        metadata = http.get("/.well-known/oauth-protected-resource/sync/v1")
        server = http.get("/.well-known/oauth-authorization-server").json()
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == sync_resource(api)
    assert metadata.json()["scopes_supported"] == ["sync"]
    assert metadata.json()["authorization_servers"] == [api.base_url]
    assert "sync" in server["scopes_supported"]


def test_revoking_on_the_dashboard_stops_the_next_sync_request(api: RunningServer, user: Browser) -> None:
    assert user.user_id is not None
    client = make_sync_client(api, user.user_id, name="nas in the cupboard")
    token = _issued(api, client)["access_token"]
    principal = authenticate(api, token, sync_resource(api))
    assert isinstance(principal, Principal)
    assert api.run(api.container.authenticator.still_valid(principal)) is True
    assert "nas in the cupboard" in user.get("/dashboard").text

    assert user.submit("/dashboard", f"/dashboard/clients/{client['client_id']}/revoke").status_code == 303
    assert isinstance(authenticate(api, token, sync_resource(api)), Unauthorized)
    assert api.run(api.container.authenticator.still_valid(principal)) is False


def test_token_requests_for_a_sync_client_with_a_wrong_secret_are_invalid_client(api: RunningServer) -> None:
    client = make_sync_client(api, make_account(api).user_id)
    wrong = token_request(api, {"grant_type": "client_credentials"}, auth=(client["client_id"], "nope"))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client", wrong.text


def test_over_http_the_sync_api_takes_sync_tokens_and_nothing_else(
    api: RunningServer, user: Browser, tokens_for: Any
) -> None:
    assert user.user_id is not None
    issued = _issued(api, make_sync_client(api, user.user_id))["access_token"]
    with api.client(issued) as sync:
        me = sync.get("/sync/v1/me")
    assert me.status_code == 200 and me.json()["user_id"] == user.user_id, me.text

    metadata = f'resource_metadata="{api.base_url}/.well-known/oauth-protected-resource/sync/v1"'
    key = user.create_key("laptop")
    on_api = tokens_for(user, f"{api.base_url}/v1")["access_token"]
    on_mcp = tokens_for(user)["access_token"]
    for credential in (None, key, on_api, on_mcp, "ego_forged"):
        with api.client(credential) as http:
            refused = http.get("/sync/v1/me")
            pushed = http.post("/sync/v1/push", json={"changes": []})
        assert refused.status_code == 401 and pushed.status_code == 401, (credential, refused.text, pushed.text)
        assert metadata in refused.headers["www-authenticate"], refused.headers
    with api.client() as http:
        assert http.get("/sync/v1/me", headers={"X-API-Key": key}).status_code == 401


def test_an_expired_sync_token_is_refused_with_the_challenge_and_a_new_one_works(api: RunningServer) -> None:
    client = make_sync_client(api, make_account(api).user_id)
    token = _issued(api, client)["access_token"]
    expire_access_token(api, token)
    refused = authenticate(api, token, sync_resource(api))
    assert isinstance(refused, Unauthorized) and "expired" in refused.message
    challenge = refused.headers["WWW-Authenticate"]
    assert 'error="invalid_token"' in challenge and "oauth-protected-resource/sync/v1" in challenge
    assert isinstance(authenticate(api, _issued(api, client)["access_token"], sync_resource(api)), Principal)
