"""Client metadata, registered (RFC 7591) or fetched (Client ID Metadata Documents): what is refused, and how."""

from __future__ import annotations

import html
from typing import Any

import pytest

from tests.harness import RunningServer, add_key, make_account
from tests.oauth.conftest import approve, authorize_params, consent_form, new_pkce, redirect_query, register
from tests.web.conftest import Browser

Documents = tuple[str, dict[str, Any]]
NATIVE = "com.example.app:/oauth/callback"


def _register(api: RunningServer, body: Any, key: str | None = None) -> Any:
    with api.client(key) as http:
        return http.post("/oauth/register", json=body)


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"redirect_uris": [1]}, "redirect_uris"),
        ({"redirect_uris": "https://app.example/cb"}, "redirect_uris"),
        ({"response_types": [1]}, "response_types"),
        ({"response_types": [["code"]]}, "response_types"),
        ({"grant_types": [["authorization_code"]]}, "grant_types"),
        ({"scope": 5}, "scope"),
        ({"scope": ["memories:read"]}, "scope"),
        ({"token_endpoint_auth_method": ["none"]}, "token_endpoint_auth_method"),
        ({"client_name": {"x": 1}}, "client_name"),
        ({"contacts": [[1]]}, "contacts"),
        ({"client_uri": 7}, "client_uri"),
    ],
)
def test_registration_with_a_wrong_json_type_names_the_field(
    api: RunningServer, metadata: dict[str, Any], field: str
) -> None:
    body = {"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "none", **metadata}
    response = _register(api, body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["error"] == "invalid_client_metadata" and field in error["error_description"], error


def test_a_registration_body_that_is_not_a_json_object_is_refused(api: RunningServer) -> None:
    nested = '{"x":' + "[" * 30_000 + "]" * 30_000 + "}"
    with api.client() as http:
        deep = http.post("/oauth/register", content=nested, headers={"Content-Type": "application/json"})
        broken = http.post("/oauth/register", content=b"{not json", headers={"Content-Type": "application/json"})
        array = http.post("/oauth/register", json=[{"redirect_uris": ["https://app.example/cb"]}])
    for response in (deep, broken, array):
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_client_metadata", response.text
        assert "JSON object" in response.json()["error_description"]


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("https://app.example/cb#frag", "must not have a fragment"),
        ("javascript:alert(1)", "scheme 'javascript' is not allowed"),
        ("https://user@app.example/cb", "must not carry user information"),
        ("https:///cb", "has no host"),
        ("http://app.example/cb", "only allowed on 127.0.0.1"),
        # These two once answered 500 at /oauth/authorize (U+2028) or dropped the connection there (a NUL).
        ("https://app.example/cb\u2028x", "printable ASCII"),
        ("https://app.example/cb\x00", "printable ASCII"),
        ("https://app.example/c b", "printable ASCII"),
        ("https://app.example/" + "x" * 2000, "longer than 2000"),
    ],
)
def test_a_refused_redirect_uri_gets_engrams_own_reason(api: RunningServer, uri: str, problem: str) -> None:
    response = _register(api, {"redirect_uris": [uri], "token_endpoint_auth_method": "none"})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["error"] == "invalid_client_metadata" and problem in error["error_description"], error
    assert "Invalid claim" not in error["error_description"]


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"redirect_uris": [f"https://app.example/cb{i}" for i in range(11)]}, "redirect_uris may hold at most 10"),
        ({"client_name": "n" * 201}, "client_name is longer than 200"),
        ({"client_uri": "https://app.example/" + "x" * 2000}, "client_uri is longer than 2000"),
        ({"contacts": [f"a{i}@example.test" for i in range(11)]}, "contacts may hold at most 10"),
        ({"client_name": "bad\x00name"}, "client_name must not contain NUL"),
    ],
)
def test_client_metadata_is_bounded(api: RunningServer, metadata: dict[str, Any], problem: str) -> None:
    body = {"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "none", **metadata}
    response = _register(api, body)
    assert response.status_code == 400, response.text
    assert problem in response.json()["error_description"], response.text


def test_ten_redirect_uris_are_allowed(api: RunningServer) -> None:
    uris = [f"https://app.example/cb{i}" for i in range(10)]
    assert _register(api, {"redirect_uris": uris, "token_endpoint_auth_method": "none"}).status_code == 201


def test_a_native_app_registers_a_private_use_scheme_and_gets_its_code_there(api: RunningServer, user: Browser) -> None:
    """RFC 8252 section 7.1: a reverse-domain scheme, matched exactly at the authorization endpoint."""
    client = register(api, redirect_uris=[NATIVE])
    assert client["redirect_uris"] == [NATIVE]
    params = authorize_params(client["client_id"], new_pkce(), None, redirect_uri=NATIVE)
    approved = approve(user, params)
    assert approved.headers["location"].startswith(NATIVE + "?code="), approved.headers
    assert redirect_query(approved)["state"] == "st-1"
    other = user.get("/oauth/authorize", params={**params, "redirect_uri": "com.example.app:/other"})
    assert other.status_code == 400 and "location" not in other.headers


def test_a_read_only_key_registers_a_machine_client_that_defaults_to_read(api: RunningServer) -> None:
    reader = make_account(api, scope="read")
    body = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"}
    created = _register(api, body, key=reader.key)
    assert created.status_code == 201, created.text
    client = created.json()
    assert client["scope"] == "memories:read"
    with api.client() as http:
        issued = http.post(
            "/oauth/token",
            data={"grant_type": "client_credentials"},
            auth=(client["client_id"], client["client_secret"]),
        )
    assert issued.status_code == 200 and issued.json()["scope"] == "memories:read", issued.text
    wider = _register(api, {**body, "scope": "memories:write"}, key=reader.key)
    assert wider.status_code == 400 and "read-only key" in wider.json()["error_description"]


def test_a_key_bound_to_one_agent_cannot_register_a_client_whose_tokens_act_as_the_account(
    api: RunningServer,
) -> None:
    owner = make_account(api)
    bound = add_key(api, owner.user_id, session="proj", agent="bob")
    body = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_post"}
    refused = _register(api, {**body, "scope": "memories:write"}, key=bound.key)
    assert refused.status_code == 403, refused.text
    assert "bound to session 'proj' and agent 'bob'" in refused.text
    assert _register(api, body, key=owner.key).status_code == 201


def _document_page(user: Browser, documents: Documents, name: str, **fields: Any) -> Any:
    base, served = documents
    client_id = f"{base}/clients/{name}.json"
    redirect = "http://127.0.0.1:8765/callback"
    served[f"/clients/{name}.json"] = {"client_id": client_id, "redirect_uris": [redirect], **fields}
    return user.get("/oauth/authorize", params=authorize_params(client_id, new_pkce(), None))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"grant_types": [[1]]}, "grant_types"),
        ({"grant_types": "authorization_code"}, "grant_types"),
        ({"response_types": [{"x": 1}]}, "response_types"),
        ({"response_types": ["token"]}, "response_types"),
        ({"scope": 5}, "scope"),
        ({"scope": "admin"}, "scope"),
        ({"redirect_uris": [["http://127.0.0.1:8765/callback"]]}, "redirect_uris"),
        ({"client_name": ["x"]}, "client_name"),
    ],
)
def test_a_malformed_metadata_document_gets_an_error_page_naming_the_field(
    api: RunningServer, user: Browser, document_server: Documents, fields: dict[str, Any], problem: str
) -> None:
    page = _document_page(user, document_server, f"bad-{problem}-{len(str(fields))}", **fields)
    assert page.status_code == 400 and "location" not in page.headers, page.text
    message = html.unescape(page.text)
    assert "metadata document cannot be used" in message and problem in message


def test_a_deeply_nested_metadata_document_gets_an_error_page(
    api: RunningServer, user: Browser, document_server: Documents
) -> None:
    base, served = document_server
    served["/clients/deep.json"] = b"[" * 2500 + b"]" * 2500
    page = user.get("/oauth/authorize", params=authorize_params(f"{base}/clients/deep.json", new_pkce(), None))
    assert page.status_code == 400 and "not JSON" in html.unescape(page.text), page.text


def test_a_metadata_document_with_supported_scopes_shows_them_on_consent(
    api: RunningServer, user: Browser, document_server: Documents
) -> None:
    page = _document_page(user, document_server, "reader", scope="memories:read")
    assert consent_form(page)["client_id"].endswith("/clients/reader.json")
    assert "memories:read" in page.text and "memories:write" not in page.text
