"""OAuth endpoints: metadata (RFC 8414, RFC 9728), registration, the consent page, token, device authorization (RFC
8628, its page is in ``device_pages``), revocation, introspection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from litestar import Litestar, MediaType, Request, Response, Router, get, post
from litestar.datastructures import MultiDict
from litestar.response import Redirect

from app.accounts.principal import Principal
from app.container import Container
from app.errors import AppError, NotFound, RateLimited
from app.oauth import resources
from app.oauth.adapter import Reply, is_form
from app.oauth.adapter import Request as OAuthRequest
from app.oauth.device_pages import device_decision, device_page
from app.oauth.service import AUTHORIZE_PARAMS, Consent, OAuthService
from app.portability.erase import ACCOUNT_DELETED, basic_client_id, is_erased
from app.web.address_limits import device_authorization_guard, registration_guard, token_guard
from app.web.errors import error_page
from app.web.pages import PAGE_HEADERS, form_data, render
from app.web.session import current_user, login_redirect, verify_csrf

SERVICE = "oauth"
_STILL_WAITING = ("authorization_pending", "slow_down")
# Client metadata documents are small; anything slow or large is refused rather than waited for.
_DOCUMENT_LIMITS = httpx.Limits(max_connections=20, max_keepalive_connections=5)


def oauth_service(container: Container) -> OAuthService:
    service: OAuthService = container.extras[SERVICE]
    return service


@asynccontextmanager
async def oauth_lifespan(app: Litestar) -> AsyncIterator[None]:
    container: Container = app.state.container
    async with httpx.AsyncClient(limits=_DOCUMENT_LIMITS, timeout=5.0, follow_redirects=False) as http:
        container.extras[SERVICE] = OAuthService(container.db, container.settings.resolved_public_base_url, http)
        yield


def _multi(values: MultiDict[Any] | Any) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for key, value in values.multi_items():
        if isinstance(value, str):
            result.setdefault(key, []).append(value)
    return result


def _reply(reply: Reply) -> Response[Any]:
    headers = {k: v for k, v in reply.headers if k.lower() != "content-type"}
    if reply.location is not None:
        return Response(content=b"", status_code=reply.status, headers=headers)
    return Response(content=reply.body, status_code=reply.status, headers=headers, media_type=MediaType.JSON)


def _metadata_response(content: dict[str, Any]) -> Response[Any]:
    return Response(content=content, media_type=MediaType.JSON, headers={"Cache-Control": "max-age=300"})


@get("/.well-known/oauth-authorization-server")
async def authorization_server_metadata(container: Container) -> Response[Any]:
    return _metadata_response(oauth_service(container).metadata())


@get(["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/v1"])
async def api_resource_metadata(container: Container) -> Response[Any]:
    service = oauth_service(container)
    metadata = service.protected_resource(resources.api_resource(service.base))
    assert metadata is not None
    return _metadata_response(metadata)


@get("/.well-known/oauth-protected-resource/sync/v1")
async def sync_resource_metadata(container: Container) -> Response[Any]:
    service = oauth_service(container)
    metadata = service.protected_resource(resources.sync_resource(service.base))
    assert metadata is not None
    return _metadata_response(metadata)


@get("/.well-known/oauth-protected-resource/mcp/v2/{client_name:str}/{user_id:str}")
async def mcp_resource_metadata(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    service = oauth_service(container)
    # The raw path keeps the client's percent-encoding; resources.parse makes it canonical.
    raw = request.scope.get("raw_path") or request.scope["path"].encode()
    metadata = service.protected_resource(service.base + raw.decode("latin-1")[len(resources.PRM_PATH) :])
    if metadata is None:
        raise NotFound("no such MCP endpoint: the form is /mcp/v2/<client_name>/<user_id>")
    return _metadata_response(metadata)


@post("/oauth/register")
async def register(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    guard = registration_guard(container.settings)
    await guard.check(request, container)
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError):
        body = None
    registrant: Principal | None = None
    if request.headers.get("authorization"):
        # An API key (RFC 7591 initial access token) registers a client that acts as its user.
        registrant = await container.authenticator.authenticate(
            request.headers, resource=resources.api_resource(container.settings.resolved_public_base_url)
        )
        # Its client's tokens would act as the whole account: a key bound to one agent must not mint them.
        registrant.require_unbound("registering an OAuth client")
    reply = await oauth_service(container).register(request.headers, body, registrant)
    if reply.status < 400:
        await guard.count(request, container)
    return _reply(reply)


def _consent_page(request: Request[Any, Any, Any], user: Any, consent: Consent) -> Response[Any]:
    # Browsers apply form-action to the redirect that follows the form, so the client's origin must be allowed.
    csp = PAGE_HEADERS["Content-Security-Policy"].replace(
        "form-action 'self'", f"form-action 'self' {consent.redirect_origin}"
    )
    return render(request, "oauth_consent.html", user=user, headers={"Content-Security-Policy": csp}, consent=consent)


@get("/oauth/authorize")
async def authorize(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    user = await current_user(request)
    if user is None:
        return login_redirect(request)
    service = oauth_service(container)
    oauth_request = service.request("GET", "/oauth/authorize", request.headers, _multi(request.query_params))
    try:
        result = await service.consent(oauth_request, user.id)
    except AppError as exc:
        return error_page(request, exc.status_code, exc.message)
    if isinstance(result, Reply):
        return _reply(result)
    return _consent_page(request, user, result)


@post("/oauth/authorize")
async def decide(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    data = await form_data(request)
    params = {k: [data[k]] for k in AUTHORIZE_PARAMS if k in data}
    user = await current_user(request)
    if user is None:
        query = urlencode([(k, v[0]) for k, v in params.items()])
        return Redirect(f"/login?next={quote('/oauth/authorize?' + query, safe='')}", status_code=303)
    try:
        await verify_csrf(request, data.get("_csrf"))
        service = oauth_service(container)
        oauth_request = service.request("POST", "/oauth/authorize", request.headers, params)
        reply = await service.decide(oauth_request, user.id, approve=data.get("decision") == "approve")
    except AppError as exc:
        return error_page(request, exc.status_code, exc.message)
    return _reply(reply)


async def _form_request(
    request: Request[Any, Any, Any], container: Container, path: str
) -> tuple[OAuthService, OAuthRequest]:
    service = oauth_service(container)
    # A body of another type is not parsed: the service refuses it (service.form_error).
    form = _multi(await request.form()) if is_form(request.headers.get("content-type")) else {}
    # Credentials and codes belong in the body (RFC 6749 section 3.2); the query is ignored.
    return service, service.request("POST", path, request.headers, {}, form)


def _token_limited(exc: RateLimited) -> Response[Any]:
    """The failed-request limit, in the token endpoint's error shape (RFC 6749 section 5.2), Retry-After kept."""
    body = {"error": "temporarily_unavailable", "error_description": exc.message}
    headers = {**exc.headers, "Cache-Control": "no-store", "Pragma": "no-cache"}
    return Response(content=body, status_code=exc.status_code, headers=headers, media_type=MediaType.JSON)


_REFUSED = ("invalid_grant", "invalid_client")


async def _told_if_erased(request: Request[Any, Any, Any], container: Container, reply: Reply) -> Reply:
    """A refresh token or machine client of a deleted account is refused saying so, so that its machine stops."""
    form = _multi(await request.form()) if is_form(request.headers.get("content-type")) else {}
    presented = [*form.get("refresh_token", []), *form.get("client_id", []), basic_client_id(request.headers)]
    for credential in presented:
        if credential and await is_erased(container.db, credential):
            body = {**reply.body, "error_description": f"{ACCOUNT_DELETED}: the account was deleted on this server"}
            return replace(reply, body=body)
    return reply


@post("/oauth/token")
async def token(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    guard = token_guard(container.settings)
    try:
        await guard.check(request, container)
    except RateLimited as exc:
        return _token_limited(exc)
    service, oauth_request = await _form_request(request, container, "/oauth/token")
    reply = await service.token(oauth_request)
    if reply.status >= 400 and isinstance(reply.body, dict) and reply.body.get("error") in _REFUSED:
        reply = await _told_if_erased(request, container, reply)
    # A device polling while its person decides is not failing (RFC 8628 section 3.5).
    if reply.status >= 400 and not (isinstance(reply.body, dict) and reply.body.get("error") in _STILL_WAITING):
        await guard.count(request, container)
    return _reply(reply)


@post("/oauth/device_authorization")
async def device_authorization(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    guard = device_authorization_guard(container.settings)
    try:
        await guard.check(request, container)
    except RateLimited as exc:
        return _token_limited(exc)
    service, oauth_request = await _form_request(request, container, "/oauth/device_authorization")
    reply = await service.device_authorization(oauth_request)
    await guard.count(request, container)
    return _reply(reply)


@post("/oauth/revoke")
async def revoke(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    service, oauth_request = await _form_request(request, container, "/oauth/revoke")
    return _reply(await service.revoke(oauth_request))


@post("/oauth/introspect")
async def introspect(request: Request[Any, Any, Any], container: Container) -> Response[Any]:
    service, oauth_request = await _form_request(request, container, "/oauth/introspect")
    return _reply(await service.introspect(oauth_request))


oauth_router = Router(
    path="/",
    route_handlers=[
        authorization_server_metadata,
        api_resource_metadata,
        sync_resource_metadata,
        mcp_resource_metadata,
        register,
        authorize,
        decide,
        token,
        device_authorization,
        device_page,
        device_decision,
        revoke,
        introspect,
    ],
    include_in_schema=False,
)
