"""The node's side of edge sync's OAuth: finding the edge's endpoints, getting tokens for its sync resource (device
flow or client credentials), refreshing them and revoking them. Plain async functions over one ``httpx.AsyncClient``
that the caller owns (authlib's AsyncOAuth2Client drops ``resource`` when it refreshes, see NOTES.md); every token
request names the sync resource (RFC 8707).

How ``engram sync link|status|once|unlink`` and the worker use it::

    async with timeouts.client(settings) as http:
        edge = await discover(http, "https://edge.example")    # once per link and process; keep the Edge
        # A person (RFC 8628):
        client = await register_device_client(http, edge, default_device_name())
        flow = await start_device_flow(http, edge, client)     # print flow.verification_uri and flow.user_code
        tokens = await poll_device_flow(http, edge, client, flow)
        # A server or script, with what `engram sync clients create` printed on the edge:
        client = NodeClient(client_id, client_secret)
        tokens = await client_credentials_token(http, edge, client)
        # Before tokens.expires_at, or once after a 401 from /sync/v1 (then retry the request once):
        tokens = await renew(http, edge, client, tokens)        # refresh (rotated: store the new refresh token)
        # Unlink:
        await revoke_tokens(http, edge, client, tokens)

Store ``client.client_id``, ``client.client_secret`` and the ``Tokens`` fields with the link; a device client is
public (no secret). Errors are ``SyncAuthError``s, each with a ``state`` for ``engram sync status``:

- ``EdgeUnreachable`` (``offline``): no connection, a timeout, a 5xx or 429; try again later.
- ``CredentialsRefused`` (``unauthorized``): the edge refused the client or the grant (revoked, expired, reused);
  the link needs ``engram sync link`` again.
- ``DeviceFlowDenied`` / ``DeviceFlowExpired`` (``unauthorized``): the person denied, or nobody approved in time.
- ``EdgeRefused`` (``refused``): the edge answered, but not as an Engram edge with sync would (no sync resource,
  an unexpected OAuth error, a body that is not the documented JSON).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from app.errors import AppError, Forbidden, ServiceUnavailable, Unauthorized, ValidationFailed
from app.sync import timeouts
from app.sync.grants import NodeClient, Tokens

SYNC_PATH = "/sync/v1"
SYNC_SCOPE = "sync"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_SECONDS = 5
# RFC 8628 section 3.2: the interval when the edge names none.
DEFAULT_INTERVAL = 5
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_ACCEPTED = "https://HOST[:PORT][/PATH], or http:// on this machine (localhost, 127.0.0.1 or [::1])"
_REFUSING = ("invalid_client", "invalid_grant", "unauthorized_client", "access_denied")

Sleep = Callable[[float], Awaitable[None]]


class SyncAuthError(AppError):
    """Getting or using an edge's OAuth credentials failed; ``state`` is how ``engram sync status`` shows it."""

    state: ClassVar[str] = "refused"


class AccountGone(SyncAuthError):
    """The edge deleted the account this link synced with (410 ``account_deleted``): final, never retried."""

    status_code = 410
    code = "account_deleted"
    state = "account_deleted"


# What a deleted account's credentials hear from the edge's token endpoint (error_description starts with it).
ACCOUNT_DELETED = "account_deleted"


class EdgeUnreachable(SyncAuthError, ServiceUnavailable):
    code = "edge_unreachable"
    state = "offline"


class CredentialsRefused(SyncAuthError, Unauthorized):
    code = "credentials_refused"
    state = "unauthorized"


class DeviceFlowDenied(SyncAuthError, Forbidden):
    code = "device_flow_denied"
    state = "unauthorized"


class DeviceFlowExpired(SyncAuthError, Unauthorized):
    code = "device_flow_expired"
    state = "unauthorized"


class EdgeRefused(SyncAuthError):
    status_code = 502
    code = "edge_refused"
    state = "refused"


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge's OAuth endpoints, read from its metadata (RFC 9728 for the sync resource, then RFC 8414)."""

    url: str
    sync_resource: str
    issuer: str
    token_endpoint: str
    device_authorization_endpoint: str | None
    registration_endpoint: str | None
    revocation_endpoint: str | None


@dataclass(frozen=True, slots=True)
class DeviceFlow:
    """RFC 8628 section 3.2: show ``verification_uri`` and ``user_code`` (or ``verification_uri_complete``)."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: int
    interval: int


def default_device_name() -> str:
    """What the consent page on the edge calls this machine unless told otherwise."""
    return f"Engram on {socket.gethostname() or 'an unnamed machine'}"[:100]


def normalise_edge_url(url: str) -> str:
    """``https://host[:port][/path]`` without a trailing slash; plain http only on a loopback host (tokens travel)."""
    raw = url.strip().rstrip("/")
    try:
        parts = urlsplit(raw)
        _ = parts.port
    except ValueError:
        raise ValidationFailed(f"{url!r} is not a URL", field="edge") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(f"the edge URL must be {_ACCEPTED}, got {url!r}", field="edge")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValidationFailed("the edge URL must not have a query, fragment or user name", field="edge")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise ValidationFailed(f"the edge URL must use https (tokens travel): it must be {_ACCEPTED}", field="edge")
    return raw


def _well_known(url: str, suffix: str) -> str:
    """RFC 8414 section 3.1 and RFC 9728 section 3.1: the well-known path goes between the host and the path."""
    parts = urlsplit(url)
    path = parts.path if parts.path != "/" else ""
    return f"{parts.scheme}://{parts.netloc}/.well-known/{suffix}{path}"


async def _send(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        response = await timeouts.request(http, method, url, **kwargs)
    except httpx.TransportError as exc:
        raise EdgeUnreachable(f"cannot reach {url}: {exc.__class__.__name__} {exc}".strip()) from exc
    if response.status_code >= 500 or response.status_code == 429:
        wait = response.headers.get("retry-after")
        hint = f", retry after {wait} s" if wait and wait.isdigit() else ""
        raise EdgeUnreachable(f"{url} answered {response.status_code}{hint}")
    return response


def _json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise EdgeRefused(f"{what}: {response.request.url} answered {response.status_code} without a JSON object")
    return body


def _string(body: dict[str, Any], name: str, what: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise EdgeRefused(f"{what}: the answer has no {name}")
    return value


def _optional_string(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    return value if isinstance(value, str) and value else None


async def _get_metadata(http: httpx.AsyncClient, url: str, what: str) -> dict[str, Any]:
    response = await _send(http, "GET", url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise EdgeRefused(f"{what} not found at {url} ({response.status_code}): is this an Engram edge with sync?")
    return _json_object(response, what)


async def discover(http: httpx.AsyncClient, edge_url: str) -> Edge:
    """The edge's sync resource and OAuth endpoints; EdgeRefused when it is not an Engram edge that offers sync."""
    url = normalise_edge_url(edge_url)
    resource = url + SYNC_PATH
    protected = await _get_metadata(http, _well_known(resource, "oauth-protected-resource"), "sync resource metadata")
    if protected.get("resource") != resource:
        raise EdgeRefused(f"the sync resource metadata names {protected.get('resource')!r}, not {resource}")
    servers = protected.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise EdgeRefused("the sync resource metadata names no authorization server")
    issuer = servers[0].rstrip("/")
    metadata = await _get_metadata(http, _well_known(issuer, "oauth-authorization-server"), "OAuth server metadata")
    if str(metadata.get("issuer", "")).rstrip("/") != issuer:
        raise EdgeRefused(f"the OAuth server metadata's issuer is {metadata.get('issuer')!r}, not {issuer}")
    return Edge(
        url=url,
        sync_resource=resource,
        issuer=issuer,
        token_endpoint=_string(metadata, "token_endpoint", "OAuth server metadata"),
        device_authorization_endpoint=_optional_string(metadata, "device_authorization_endpoint"),
        registration_endpoint=_optional_string(metadata, "registration_endpoint"),
        revocation_endpoint=_optional_string(metadata, "revocation_endpoint"),
    )


def _client_auth(client: NodeClient, data: dict[str, str]) -> httpx.BasicAuth | None:
    """A confidential client authenticates with HTTP Basic; a public one names itself in the body."""
    if client.client_secret is not None:
        return httpx.BasicAuth(client.client_id, client.client_secret)
    data["client_id"] = client.client_id
    return None


def _oauth_error(response: httpx.Response, what: str) -> SyncAuthError:
    body = _json_object(response, what)
    error = str(body.get("error") or "unknown_error")
    description = body.get("error_description")
    message = f"{what}: {error}" + (f" ({description})" if isinstance(description, str) and description else "")
    if isinstance(description, str) and description.startswith(ACCOUNT_DELETED):
        return AccountGone(gone_message(edge_url=str(response.request.url)))
    if error in _REFUSING:
        return CredentialsRefused(message, oauth_error=error)
    return EdgeRefused(message, oauth_error=error)


def _tokens(response: httpx.Response, edge: Edge, what: str) -> Tokens:
    body = _json_object(response, what)
    if str(body.get("token_type", "")).lower() != "bearer":
        raise EdgeRefused(f"{what}: expected a Bearer token, got {body.get('token_type')!r}")
    # RFC 6749 section 5.1: an omitted scope is the one requested.
    scope = body.get("scope") if isinstance(body.get("scope"), str) else SYNC_SCOPE
    if SYNC_SCOPE not in str(scope).split():
        raise EdgeRefused(f"{what}: the token's scope is {scope!r}, without {SYNC_SCOPE}")
    expires_in = body.get("expires_in")
    expires_at = None
    if isinstance(expires_in, int) and not isinstance(expires_in, bool) and expires_in > 0:
        expires_at = datetime.now(UTC) + timedelta(seconds=expires_in)
    return Tokens(
        access_token=_string(body, "access_token", what),
        refresh_token=_optional_string(body, "refresh_token"),
        expires_at=expires_at,
        scope=str(scope),
        resource=edge.sync_resource,
    )


async def _token_request(
    http: httpx.AsyncClient, edge: Edge, client: NodeClient, data: dict[str, str]
) -> httpx.Response:
    data = {**data, "resource": edge.sync_resource}
    auth = _client_auth(client, data)
    return await _send(http, "POST", edge.token_endpoint, data=data, auth=auth or httpx.USE_CLIENT_DEFAULT)


async def register_device_client(http: httpx.AsyncClient, edge: Edge, name: str) -> NodeClient:
    """Register this node on the edge as a public device client called ``name`` (what the consent page shows)."""
    name = name.strip()
    if not name or len(name) > 100 or not name.isprintable():
        raise ValidationFailed("the device name must be 1-100 printable characters", field="name")
    if edge.registration_endpoint is None:
        raise EdgeRefused("the edge does not offer client registration")
    body = {
        "client_name": name,
        "grant_types": [DEVICE_GRANT, "refresh_token"],
        "token_endpoint_auth_method": "none",
        "scope": SYNC_SCOPE,
        "software_id": "engram",
    }
    response = await _send(http, "POST", edge.registration_endpoint, json=body)
    if response.status_code != 201:
        raise _oauth_error(response, "registering this device")
    return NodeClient(_string(_json_object(response, "registering this device"), "client_id", "registration"))


async def start_device_flow(http: httpx.AsyncClient, edge: Edge, client: NodeClient) -> DeviceFlow:
    """RFC 8628 section 3.1: a device code to poll with and a user code for the person to approve."""
    if edge.device_authorization_endpoint is None:
        raise EdgeRefused("the edge does not offer the device authorization grant")
    data = {"scope": SYNC_SCOPE, "resource": edge.sync_resource}
    auth = _client_auth(client, data)
    response = await _send(
        http, "POST", edge.device_authorization_endpoint, data=data, auth=auth or httpx.USE_CLIENT_DEFAULT
    )
    what = "starting the device flow"
    if response.status_code != 200:
        raise _oauth_error(response, what)
    body = _json_object(response, what)
    expires_in, interval = body.get("expires_in"), body.get("interval", DEFAULT_INTERVAL)
    if not isinstance(expires_in, int) or not isinstance(interval, int) or expires_in <= 0 or interval < 0:
        raise EdgeRefused(f"{what}: expires_in and interval must be whole seconds")
    return DeviceFlow(
        device_code=_string(body, "device_code", what),
        user_code=_string(body, "user_code", what),
        verification_uri=_string(body, "verification_uri", what),
        verification_uri_complete=_optional_string(body, "verification_uri_complete"),
        expires_in=expires_in,
        interval=interval,
    )


async def poll_device_flow(
    http: httpx.AsyncClient, edge: Edge, client: NodeClient, flow: DeviceFlow, *, sleep: Sleep = asyncio.sleep
) -> Tokens:
    """Poll until the person decides (RFC 8628 section 3.4): every ``interval`` seconds, 5 s more after each
    slow_down; network trouble is retried until the code expires. DeviceFlowDenied, DeviceFlowExpired."""
    interval = flow.interval
    deadline = time.monotonic() + flow.expires_in
    data = {"grant_type": DEVICE_GRANT, "device_code": flow.device_code}
    while True:
        await sleep(interval)
        try:
            response = await _token_request(http, edge, client, data)
        except EdgeUnreachable:
            if time.monotonic() >= deadline:
                raise
            continue
        if response.status_code == 200:
            return _tokens(response, edge, "the device flow")
        error = _oauth_error(response, "the device flow")
        oauth_error = error.extra.get("oauth_error")
        if oauth_error == "slow_down":
            interval += SLOW_DOWN_SECONDS
        elif oauth_error == "access_denied":
            raise DeviceFlowDenied("the request was denied on the edge's verification page")
        elif oauth_error == "expired_token":
            raise DeviceFlowExpired("nobody approved the code in time; run the link again for a new code")
        elif oauth_error != "authorization_pending":
            raise error
        if time.monotonic() >= deadline:
            raise DeviceFlowExpired("nobody approved the code in time; run the link again for a new code")


async def client_credentials_token(http: httpx.AsyncClient, edge: Edge, client: NodeClient) -> Tokens:
    """A token for a sync client (``engram sync clients create`` on the edge): client_credentials, no refresh."""
    if client.client_secret is None:
        raise ValidationFailed("client credentials need the client's secret", field="client_secret")
    response = await _token_request(http, edge, client, {"grant_type": "client_credentials", "scope": SYNC_SCOPE})
    if response.status_code != 200:
        raise _oauth_error(response, "getting a token with the client's credentials")
    return _tokens(response, edge, "getting a token with the client's credentials")


async def refresh(http: httpx.AsyncClient, edge: Edge, client: NodeClient, refresh_token: str) -> Tokens:
    """Exchange a refresh token (rotated: the answer carries the next one, and the old one is spent)."""
    response = await _token_request(http, edge, client, {"grant_type": "refresh_token", "refresh_token": refresh_token})
    if response.status_code != 200:
        raise _oauth_error(response, "refreshing the sync token")
    return _tokens(response, edge, "refreshing the sync token")


async def renew(http: httpx.AsyncClient, edge: Edge, client: NodeClient, tokens: Tokens) -> Tokens:
    """New tokens for a link: refresh when there is a refresh token, else client credentials again."""
    if tokens.refresh_token is not None:
        return await refresh(http, edge, client, tokens.refresh_token)
    if client.client_secret is not None:
        return await client_credentials_token(http, edge, client)
    raise CredentialsRefused("this link has neither a refresh token nor a client secret; link it again")


async def revoke(http: httpx.AsyncClient, edge: Edge, client: NodeClient, token: str, hint: str) -> None:
    """RFC 7009: revoke one token (a refresh token ends its whole grant on an Engram edge)."""
    if edge.revocation_endpoint is None:
        raise EdgeRefused("the edge does not offer token revocation")
    data = {"token": token, "token_type_hint": hint}
    auth = _client_auth(client, data)
    response = await _send(http, "POST", edge.revocation_endpoint, data=data, auth=auth or httpx.USE_CLIENT_DEFAULT)
    if response.status_code != 200:
        raise _oauth_error(response, "revoking the sync token")


async def revoke_tokens(http: httpx.AsyncClient, edge: Edge, client: NodeClient, tokens: Tokens) -> None:
    """At unlink: the refresh token first (the grant ends with it), then the access token."""
    if tokens.refresh_token is not None:
        await revoke(http, edge, client, tokens.refresh_token, "refresh_token")
    await revoke(http, edge, client, tokens.access_token, "access_token")


def gone_message(edge_url: str) -> str:
    return (
        f"the account this machine synced with was deleted on the edge ({edge_url}); nothing more is sent or "
        "pulled: remove the link (engram sync unlink) or link another account"
    )
