"""app.sync.credentials, the node's side, against a real edge over HTTP: discovery, the device flow (slow_down,
denied, expired), client credentials, refresh (always naming the resource) and revocation at unlink."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from app.accounts.principal import Principal
from app.errors import Unauthorized, ValidationFailed
from app.sync import credentials as cr
from tests.harness import RunningServer, free_port, make_account
from tests.oauth.conftest import authenticate, decide_device, expire_device_code, make_sync_client, poll_device
from tests.web.conftest import Browser


def _run(api: RunningServer, work: Callable[[httpx.AsyncClient, cr.Edge], Awaitable[Any]]) -> tuple[Any, list[Any]]:
    """Run ``work`` with a fresh client and the discovered edge; also return every request's form body it sent."""
    sent: list[dict[str, list[str]]] = []

    async def record(request: httpx.Request) -> None:
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            sent.append({"url": [str(request.url)], **parse_qs(request.content.decode())})

    async def main() -> Any:
        async with httpx.AsyncClient(timeout=30, event_hooks={"request": [record]}) as http:
            edge = await cr.discover(http, api.base_url + "/")
            return await work(http, edge)

    return asyncio.run(main()), sent


def test_discovery_finds_the_sync_resource_and_the_endpoints(api: RunningServer) -> None:
    edge, _ = _run(api, lambda http, edge: asyncio.sleep(0, edge))
    assert edge == cr.Edge(
        url=api.base_url,
        sync_resource=f"{api.base_url}/sync/v1",
        issuer=api.base_url,
        token_endpoint=f"{api.base_url}/oauth/token",
        device_authorization_endpoint=f"{api.base_url}/oauth/device_authorization",
        registration_endpoint=f"{api.base_url}/oauth/register",
        revocation_endpoint=f"{api.base_url}/oauth/revoke",
    )


@pytest.mark.parametrize(
    "url",
    [
        "ftp://edge.example",
        "http://edge.example",
        "https://",
        "https://edge.example/?x=1",
        "https://u@edge.example",
        "x",
    ],
)
def test_an_edge_url_must_be_https_or_local(url: str) -> None:
    with pytest.raises(ValidationFailed):
        cr.normalise_edge_url(url)


def test_a_server_that_is_not_an_engram_edge_or_not_there_is_told_apart(
    document_server: tuple[str, dict[str, Any]],
) -> None:
    base, documents = document_server
    documents["/.well-known/oauth-protected-resource/sync/v1"] = {"resource": "https://other.example/sync/v1"}

    async def discover(url: str) -> Exception:
        async with httpx.AsyncClient(timeout=10) as http:
            with pytest.raises(cr.SyncAuthError) as caught:
                await cr.discover(http, url)
        return caught.value

    impostor = asyncio.run(discover(base))
    assert isinstance(impostor, cr.EdgeRefused) and impostor.state == "refused" and "other.example" in impostor.message
    missing = asyncio.run(discover(base + "/elsewhere"))
    assert isinstance(missing, cr.EdgeRefused) and "is this an Engram edge with sync?" in missing.message
    closed = asyncio.run(discover(f"http://127.0.0.1:{free_port()}"))
    assert isinstance(closed, cr.EdgeUnreachable) and closed.state == "offline"


def test_the_device_flow_honours_slow_down_and_ends_with_tokens_that_refresh_and_revoke(
    api: RunningServer, user: Browser
) -> None:
    assert user.user_id is not None
    waits: list[float] = []
    seen: dict[str, Any] = {}

    def link(http: httpx.AsyncClient, edge: cr.Edge) -> Awaitable[Any]:
        async def work() -> Any:
            client = await cr.register_device_client(http, edge, "Engram on ada-laptop")
            flow = await cr.start_device_flow(http, edge, client)
            assert flow.verification_uri == f"{api.base_url}/device" and flow.interval == 5 and flow.expires_in == 900

            async def sleep(seconds: float) -> None:
                # No waiting: the edge's clock decides. The first time, someone else polls just before the node
                # (so the edge says slow_down); the second time, the person approves.
                waits.append(seconds)
                if len(waits) == 1:
                    poll_device(api, client.client_id, flow.device_code)
                else:
                    page = user.get("/device", params={"user_code": flow.user_code})
                    seen["page"] = page.text
                    decide_device(user, flow.user_code)

            tokens = await cr.poll_device_flow(http, edge, client, flow, sleep=sleep)
            seen["principal"] = authenticate(api, tokens.access_token, tokens.resource)
            renewed = await cr.renew(http, edge, client, tokens)
            await cr.revoke_tokens(http, edge, client, renewed)
            with pytest.raises(cr.CredentialsRefused) as refused:
                await cr.renew(http, edge, client, renewed)
            return client, tokens, renewed, refused.value

        return work()

    (_, tokens, renewed, refused), sent = _run(api, link)
    assert waits == [5, 10]
    assert "Engram on ada-laptop" in seen["page"]
    assert tokens.scope == "sync" and tokens.refresh_token and tokens.resource == f"{api.base_url}/sync/v1"
    assert tokens.expires_at is not None and not tokens.expires_within(3000)
    assert tokens.expires_within(3700)
    first = seen["principal"]
    assert isinstance(first, Principal) and first.user_id == user.user_id
    assert renewed.refresh_token != tokens.refresh_token
    # Revoked at unlink: no token of the grant works, and it cannot be renewed.
    for access in (tokens.access_token, renewed.access_token):
        assert isinstance(authenticate(api, access, tokens.resource), Unauthorized)
    assert refused.state == "unauthorized" and "invalid_grant" in refused.message
    token_requests = [body for body in sent if body["url"] == [f"{api.base_url}/oauth/token"]]
    # The node's own: slow_down, tokens, the refresh and the refused refresh; every one names the resource.
    grants = [body["grant_type"][0].rsplit(":", 1)[-1] for body in token_requests]
    assert grants == ["device_code", "device_code", "refresh_token", "refresh_token"]
    assert all(body["resource"] == [tokens.resource] for body in token_requests)


def test_a_denied_or_expired_device_flow_ends_with_its_own_error(api: RunningServer, user: Browser) -> None:
    def link(outcome: str) -> Callable[[httpx.AsyncClient, cr.Edge], Awaitable[Any]]:
        def run(http: httpx.AsyncClient, edge: cr.Edge) -> Awaitable[Any]:
            async def work() -> Any:
                client = await cr.register_device_client(http, edge, "a pi")
                flow = await cr.start_device_flow(http, edge, client)

                async def sleep(_: float) -> None:
                    if outcome == "deny":
                        decide_device(user, flow.user_code, "deny")
                    else:
                        expire_device_code(api, flow.device_code)

                with pytest.raises(cr.SyncAuthError) as caught:
                    await cr.poll_device_flow(http, edge, client, flow, sleep=sleep)
                return caught.value

            return work()

        return run

    denied, _ = _run(api, link("deny"))
    assert isinstance(denied, cr.DeviceFlowDenied) and denied.state == "unauthorized"
    expired, _ = _run(api, link("expire"))
    assert isinstance(expired, cr.DeviceFlowExpired) and expired.state == "unauthorized"


def test_client_credentials_get_renew_and_revoke_sync_tokens(api: RunningServer) -> None:
    owner = make_account(api)
    made = make_sync_client(api, owner.user_id, "backup server")
    client = cr.NodeClient(made["client_id"], made["client_secret"])

    def link(http: httpx.AsyncClient, edge: cr.Edge) -> Awaitable[Any]:
        async def work() -> Any:
            tokens = await cr.client_credentials_token(http, edge, client)
            renewed = await cr.renew(http, edge, client, tokens)
            await cr.revoke_tokens(http, edge, client, renewed)
            with pytest.raises(cr.CredentialsRefused) as wrong:
                await cr.client_credentials_token(http, edge, cr.NodeClient(client.client_id, "wrong"))
            with pytest.raises(ValidationFailed):
                await cr.client_credentials_token(http, edge, cr.NodeClient(client.client_id))
            return tokens, renewed, wrong.value

        return work()

    (tokens, renewed, wrong), sent = _run(api, link)
    assert tokens.refresh_token is None and tokens.scope == "sync"
    assert renewed.access_token != tokens.access_token
    assert authenticate(api, tokens.access_token, tokens.resource).user_id == owner.user_id
    assert isinstance(authenticate(api, renewed.access_token, tokens.resource), Unauthorized)
    assert "invalid_client" in wrong.message
    assert all(body["resource"] == [tokens.resource] for body in sent if "grant_type" in body)


def test_tokens_know_when_to_renew() -> None:
    now = datetime(2026, 11, 23, tzinfo=UTC)
    tokens = cr.Tokens("a", None, now + timedelta(seconds=90), "sync", "https://e/sync/v1")
    assert not tokens.expires_within(60, now) and tokens.expires_within(120, now)
    assert not cr.Tokens("a", None, None, "sync", "https://e/sync/v1").expires_within(10**6, now)
