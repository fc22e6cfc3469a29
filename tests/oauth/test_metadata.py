"""Discovery (RFC 8414, RFC 9728), the 401 challenge, and registration (RFC 7591 and metadata documents)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import RunningServer, make_account
from tests.oauth.conftest import REDIRECT, authorize_params, exchange, get_code, mcp_resource, new_pkce, register
from tests.web.conftest import Browser


def test_authorization_server_metadata_names_every_endpoint_and_only_s256(api: RunningServer) -> None:
    with api.client() as http:
        metadata = http.get("/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == api.base_url
    assert metadata["token_endpoint"] == f"{api.base_url}/oauth/token"
    assert metadata["registration_endpoint"] == f"{api.base_url}/oauth/register"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["scopes_supported"] == ["memories:read", "memories:write", "sync"]
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True


def test_protected_resource_metadata_for_an_mcp_url_and_the_api_root(api: RunningServer) -> None:
    with api.client() as http:
        mcp = http.get("/.well-known/oauth-protected-resource/mcp/v2/claude%20code/u_abc").json()
        root = http.get("/.well-known/oauth-protected-resource").json()
        bad = http.get("/.well-known/oauth-protected-resource/mcp/v2/claude/a__b")
    assert mcp["resource"] == f"{api.base_url}/mcp/v2/claude%20code/u_abc"
    assert mcp["authorization_servers"] == [api.base_url]
    assert mcp["bearer_methods_supported"] == ["header"]
    assert root["resource"] == f"{api.base_url}/v1"
    assert bad.status_code == 404


def test_mcp_without_a_token_gets_a_challenge_naming_its_metadata(api: RunningServer) -> None:
    with api.client() as http:
        response = http.post("/mcp/v2/cursor/u_abc", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{api.base_url}/.well-known/oauth-protected-resource/mcp/v2/cursor/u_abc"' in challenge
    assert 'scope="memories:read memories:write"' in challenge


def test_public_registration_has_no_secret_field_at_all(api: RunningServer) -> None:
    client = register(api)
    assert "client_secret" not in client and "client_secret_expires_at" not in client
    assert client["token_endpoint_auth_method"] == "none"


def test_confidential_registration_gets_a_secret(api: RunningServer) -> None:
    client = register(api, token_endpoint_auth_method="client_secret_post")
    assert len(client["client_secret"]) >= 32


@pytest.mark.parametrize(
    "metadata",
    [
        {"redirect_uris": ["http://evil.example/cb"]},
        {"redirect_uris": []},
        {"grant_types": ["implicit"]},
        {"scope": "admin"},
        {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"},
    ],
    ids=["http-not-loopback", "no-redirect", "implicit", "unknown-scope", "machine-without-key"],
)
def test_registration_refuses_bad_metadata(api: RunningServer, metadata: dict[str, Any]) -> None:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **metadata}
    with api.client() as http:
        response = http.post("/oauth/register", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_client_metadata"


def test_client_id_metadata_document_client_completes_the_flow(
    api: RunningServer, user: Browser, document_server: tuple[str, dict[str, Any]]
) -> None:
    base, documents = document_server
    client_id = f"{base}/clients/editor.json"
    documents["/clients/editor.json"] = {
        "client_id": client_id,
        "client_name": "Document Editor",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    assert user.user_id is not None
    pkce = new_pkce()
    code = get_code(user, client_id, pkce, mcp_resource(api, user.user_id))
    response = exchange(api, client_id, code, pkce)
    assert response.status_code == 200, response.text
    assert response.json()["refresh_token"].startswith("egr_")


def test_a_metadata_document_whose_client_id_differs_from_its_url_is_refused(
    api: RunningServer, user: Browser, document_server: tuple[str, dict[str, Any]]
) -> None:
    base, documents = document_server
    client_id = f"{base}/clients/liar.json"
    documents["/clients/liar.json"] = {"client_id": f"{base}/clients/other.json", "redirect_uris": [REDIRECT]}
    page = user.get("/oauth/authorize", params=authorize_params(client_id, new_pkce(), None))
    assert page.status_code == 400 and "client_id must equal its URL" in page.text


def test_a_user_api_key_registers_a_machine_client_that_acts_as_that_user(api: RunningServer) -> None:
    owner = make_account(api)
    client = register(
        api,
        key=owner.key,
        grant_types=["client_credentials"],
        token_endpoint_auth_method="client_secret_basic",
        redirect_uris=[],
        scope="memories:read memories:write",
    )
    with api.client() as http:
        issued = http.post(
            "/oauth/token",
            data={"grant_type": "client_credentials", "scope": "memories:write"},
            auth=(client["client_id"], client["client_secret"]),
        )
        assert issued.status_code == 200, issued.text
        token = issued.json()
        assert "refresh_token" not in token and token["scope"] == "memories:write"
        introspected = http.post(
            "/oauth/introspect",
            data={"token": token["access_token"]},
            auth=(client["client_id"], client["client_secret"]),
        ).json()
    assert introspected["active"] is True and introspected["sub"] == owner.user_id
    assert introspected["aud"] == f"{api.base_url}/v1"
    with api.client(token["access_token"]) as rest:
        created = rest.post("/v1/memories", json={"content": "machine wrote this"})
        assert created.status_code == 201, created.text
        assert rest.get("/v1/memories").json()["memories"][0]["content"] == "machine wrote this"
