"""A token is useful only with memories:read or memories:write: none is issued without one, and none is accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness import RunningServer
from tests.oauth.conftest import (
    authorize_params,
    mcp_status,
    new_pkce,
    redirect_query,
    register,
    set_token_scope,
    token_request,
)
from tests.web.conftest import Browser

TokensFor = Callable[..., dict[str, Any]]


def _refresh(api: RunningServer, issued: dict[str, Any], scope: str) -> Any:
    data = {
        "grant_type": "refresh_token",
        "refresh_token": issued["refresh_token"],
        "client_id": issued["client_id"],
        "scope": scope,
    }
    return token_request(api, data)


def test_a_blank_scope_on_refresh_means_the_scope_already_granted(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    """RFC 6749 section 6: an omitted scope is the original one; a blank one is no different."""
    assert user.user_id is not None
    issued = tokens_for(user)
    refreshed = _refresh(api, issued, " ")
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["scope"] == "memories:read memories:write"
    assert mcp_status(api, refreshed.json()["access_token"], user.user_id).status_code == 200


def test_a_refresh_may_narrow_the_scope_but_not_widen_it(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    issued = tokens_for(user, resource=f"{api.base_url}/v1")
    narrowed = _refresh(api, issued, "memories:read")
    assert narrowed.status_code == 200 and narrowed.json()["scope"] == "memories:read", narrowed.text
    with api.client(narrowed.json()["access_token"]) as rest:
        assert rest.get("/v1/memories").status_code == 200
        assert rest.post("/v1/memories", json={"content": "nope"}).status_code == 403
    again = {**narrowed.json(), "client_id": issued["client_id"]}
    wider = _refresh(api, again, "memories:write")
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope", wider.text
    unknown = _refresh(api, again, "admin")
    assert unknown.status_code == 400 and unknown.json()["error"] == "invalid_scope", unknown.text


def test_asking_for_a_scope_the_client_may_not_have_is_invalid_scope_not_an_empty_token(
    api: RunningServer, user: Browser
) -> None:
    client = register(api, scope="memories:read")
    params = authorize_params(client["client_id"], new_pkce(), None, scope="memories:write")
    refused = redirect_query(user.get("/oauth/authorize", params=params))
    assert refused["error"] == "invalid_scope" and refused["state"] == "st-1" and refused["iss"] == api.base_url


def test_a_token_without_a_memories_scope_cannot_read(api: RunningServer, user: Browser, tokens_for: TokensFor) -> None:
    """Tokens issued before empty scopes were refused may still exist: they are refused where they are used."""
    assert user.user_id is not None
    on_mcp = tokens_for(user)["access_token"]
    on_api = tokens_for(user, resource=f"{api.base_url}/v1")["access_token"]
    set_token_scope(api, on_mcp, "")
    set_token_scope(api, on_api, "admin")
    refused = mcp_status(api, on_mcp, user.user_id)
    assert refused.status_code == 403, refused.text
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="memories:read memories:write"' in refused.headers["www-authenticate"]
    with api.client(on_api) as rest:
        listed = rest.get("/v1/memories")
        written = rest.post("/v1/memories", json={"content": "nope"})
    for response in (listed, written):
        assert response.status_code == 403, response.text
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
        message = response.json()["error"]["message"]
        assert "neither memories:read nor memories:write" in message and "read scope" not in message
