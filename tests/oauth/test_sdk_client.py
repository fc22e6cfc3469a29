"""The official MCP SDK's OAuth client runs the whole flow against Engram, then calls a tool with the token."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.harness import RunningServer
from tests.mcp.test_tools import structured
from tests.oauth.conftest import REDIRECT, approve, mcp_resource
from tests.web.conftest import Browser


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@pytest.mark.anyio
@pytest.mark.parametrize("auth_method", [None, "none"], ids=["confidential", "public"])
async def test_sdk_registers_authorizes_exchanges_and_calls_a_tool(
    api: RunningServer, user: Browser, auth_method: str | None
) -> None:
    assert user.user_id is not None
    url = mcp_resource(api, user.user_id)
    storage = MemoryStorage()
    redirected: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        # The browser part: the logged-in user opens the URL and approves on the consent page.
        params = {k: v[0] for k, v in parse_qs(urlsplit(authorization_url).query).items()}
        assert params["code_challenge_method"] == "S256" and params["resource"] == url
        response = await anyio.to_thread.run_sync(lambda: approve(user, params))
        redirected.append(response.headers["location"])

    async def callback_handler() -> AuthorizationCodeResult:
        query = redirect_query_from(redirected[-1])
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="sdk test",
        redirect_uris=[REDIRECT],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method=auth_method,  # type: ignore[arg-type]
    )
    provider = OAuthClientProvider(url, metadata, storage, redirect_handler, callback_handler)
    with anyio.fail_after(60):
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            added = structured(await client.call_tool("add_memories", {"memories": [{"content": "OAuth works"}]}))
            assert added["results"][0]["content"] == "OAuth works"
    assert redirected and redirected[0].startswith(REDIRECT)
    assert storage.client_info is not None
    assert (storage.client_info.client_secret is None) == (auth_method == "none")
    assert storage.tokens is not None and storage.tokens.scope == "memories:read memories:write"
    assert storage.tokens.refresh_token is not None
    # The token acts as the user on the REST API only if it was issued for it: this one was not.
    with api.client(storage.tokens.access_token) as rest:
        assert rest.get("/v1/memories").status_code == 401


def redirect_query_from(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
