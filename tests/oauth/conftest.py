"""Helpers for the OAuth tests: PKCE, registration, and a logged-in browser that approves consent."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.harness import RunningServer, free_port
from tests.mcp.test_endpoint import initialize
from tests.mcp.test_mcp_remote import npx  # noqa: F401 (the shared fixture, pinned version and install)
from tests.web.conftest import Browser

REDIRECT = "http://127.0.0.1:8765/callback"
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Pkce:
    verifier: str
    challenge: str


def new_pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return Pkce(verifier, challenge)


def mcp_resource(server: RunningServer, user_id: str, client_name: str = "claude-code") -> str:
    return f"{server.base_url}/mcp/v2/{client_name}/{user_id}"


def register(server: RunningServer, key: str | None = None, **metadata: Any) -> dict[str, Any]:
    """RFC 7591 registration; a public client with one loopback redirect unless told otherwise."""
    body: dict[str, Any] = {
        "client_name": "test client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    with server.client(key) as http:
        response = http.post("/oauth/register", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def authorize_params(client_id: str, pkce: Pkce | None, resource: str | None, **extra: str) -> dict[str, str]:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "st-1"}
    if pkce is not None:
        params |= {"code_challenge": pkce.challenge, "code_challenge_method": "S256"}
    if resource is not None:
        params["resource"] = resource
    return params | extra


def consent_form(page: httpx.Response) -> dict[str, str]:
    """The hidden fields of the consent page's form (the CSRF token and the request it submits again)."""
    assert page.status_code == 200, page.text
    return {name: html.unescape(value) for name, value in _HIDDEN.findall(page.text)}


def approve(browser: Browser, params: dict[str, str], decision: str = "approve") -> httpx.Response:
    """Open the authorization URL as the logged-in browser and press a button on the consent page."""
    page = browser.get("/oauth/authorize?" + urlencode(params))
    return browser.post("/oauth/authorize", {**consent_form(page), "decision": decision})


def redirect_query(response: httpx.Response) -> dict[str, str]:
    assert response.status_code in (302, 303), response.text
    location = response.headers["location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def get_code(browser: Browser, client_id: str, pkce: Pkce, resource: str) -> str:
    query = redirect_query(approve(browser, authorize_params(client_id, pkce, resource)))
    assert query.get("state") == "st-1", query
    assert query.get("iss") == browser.server.base_url, query  # RFC 9207
    return query["code"]


def mcp_status(server: RunningServer, token: str, user_id: str, client_name: str = "claude-code") -> httpx.Response:
    """Initialize an MCP session on the user's MCP URL with ``token``."""
    with server.client(token) as http:
        return http.post(
            f"/mcp/v2/{client_name}/{user_id}",
            json=initialize(),
            headers={"Accept": "application/json, text/event-stream"},
        )


def token_request(server: RunningServer, data: dict[str, str], auth: tuple[str, str] | None = None) -> httpx.Response:
    with server.client() as http:
        return http.post("/oauth/token", data=data, auth=auth)


def exchange(server: RunningServer, client_id: str, code: str, pkce: Pkce, **extra: str) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": client_id,
        "code_verifier": pkce.verifier,
        **extra,
    }
    return token_request(server, data)


@pytest.fixture
def user(api: RunningServer) -> Iterator[Browser]:
    """A browser that signed up through the web pages and stays logged in."""
    browser = Browser(api)
    browser.signup()
    yield browser
    browser.close()


@pytest.fixture
def tokens_for(api: RunningServer) -> Callable[..., dict[str, Any]]:
    """Run the whole code flow for a browser and return the token response."""

    def run(browser: Browser, resource: str | None = None) -> dict[str, Any]:
        assert browser.user_id is not None
        client = register(api)
        pkce = new_pkce()
        code = get_code(browser, client["client_id"], pkce, resource or mcp_resource(api, browser.user_id))
        response = exchange(api, client["client_id"], code, pkce)
        assert response.status_code == 200, response.text
        return {**response.json(), "client_id": client["client_id"]}

    return run


def expire_access_token(server: RunningServer, access_token: str) -> None:
    """Move a token's expiry into the past, as an hour passing would."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.db import utcnow
    from app.oauth.credentials import digest
    from app.oauth.models import OAuthToken

    async def run() -> None:
        async with server.container.db.session() as session:
            query = update(OAuthToken).where(OAuthToken.access_hash == digest(access_token))
            await session.execute(query.values(access_expires_at=utcnow() - timedelta(seconds=1)))

    server.run(run())


@pytest.fixture(scope="module")
def document_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A local HTTP server serving Client ID Metadata Documents (http is allowed for loopback on a local server);
    a document given as bytes is served as it is."""
    documents: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            document = documents.get(self.path, {})
            body = document if isinstance(document, bytes) else json.dumps(document).encode()
            self.send_response(200 if self.path in documents else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "max-age=60")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", documents
    server.shutdown()


def set_token_scope(server: RunningServer, access_token: str, scope: str) -> None:
    """Give an issued token another scope, as a token stored before a scope rule existed would have."""
    from sqlalchemy import update

    from app.oauth.credentials import digest
    from app.oauth.models import OAuthToken

    async def run() -> None:
        async with server.container.db.session() as session:
            query = update(OAuthToken).where(OAuthToken.access_hash == digest(access_token))
            await session.execute(query.values(scope=scope))

    server.run(run())


def sync_resource(server: RunningServer) -> str:
    return f"{server.base_url}/sync/v1"


def make_sync_client(server: RunningServer, user_id: str, name: str = "build server") -> dict[str, str]:
    """A sync client, made by the same service as `engram sync clients create` (tests/oauth/test_sync_scope.py runs
    the command itself)."""
    from app.oauth import machine_clients

    async def create() -> dict[str, str]:
        async with server.container.db.session() as session:
            created = await machine_clients.create_sync_client(session, user_id, name)
        return created.as_json()

    result: dict[str, str] = server.run(create())
    return result


def sync_token(server: RunningServer, client: dict[str, str], **extra: str) -> httpx.Response:
    """client_credentials for a sync client (the resource defaults to the sync resource)."""
    data = {"grant_type": "client_credentials", **extra}
    return token_request(server, data, auth=(client["client_id"], client["client_secret"]))


def authenticate(server: RunningServer, token: str, resource: str) -> Any:
    """What the edge's sync endpoints do with a request's credential: the Principal, or the AppError it raised."""
    from app.errors import AppError

    async def run() -> Any:
        try:
            return await server.container.authenticator.authenticate({"authorization": f"Bearer {token}"}, resource)
        except AppError as exc:
            return exc

    return server.run(run())


DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def register_device(server: RunningServer, name: str = "ada's laptop", **metadata: Any) -> dict[str, Any]:
    """A node's client: public, named after the device, for the device grant and refresh, scope sync."""
    fields: dict[str, Any] = {
        "client_name": name,
        "redirect_uris": None,
        "grant_types": [DEVICE_GRANT, "refresh_token"],
        "token_endpoint_auth_method": "none",
        "scope": "sync",
        **metadata,
    }
    return register(server, **fields)


def start_device(server: RunningServer, client_id: str, **extra: str) -> httpx.Response:
    with server.client() as http:
        return http.post("/oauth/device_authorization", data={"client_id": client_id, **extra})


def poll_device(server: RunningServer, client_id: str, device_code: str, **extra: str) -> httpx.Response:
    return token_request(
        server, {"grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": client_id, **extra}
    )


def decide_device(browser: Browser, user_code: str, decision: str = "approve") -> httpx.Response:
    """Open verification_uri_complete as the logged-in browser and press a button on the device's consent page."""
    page = browser.get("/device", params={"user_code": user_code})
    return browser.post("/device", {**consent_form(page), "decision": decision})


def expire_device_code(server: RunningServer, device_code: str) -> None:
    """Move a device code's expiry into the past, as fifteen minutes passing would."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.db import utcnow
    from app.oauth.credentials import digest
    from app.oauth.models import OAuthDeviceCode

    async def run() -> None:
        async with server.container.db.session() as session:
            query = update(OAuthDeviceCode).where(OAuthDeviceCode.id == digest(device_code))
            await session.execute(query.values(expires_at=utcnow() - timedelta(seconds=1)))

    server.run(run())
