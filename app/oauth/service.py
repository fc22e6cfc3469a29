"""The OAuth authorization server as Engram uses it: consent, tokens, registration, revocation, introspection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.oauth2.rfc6749 import InsecureTransportError, InvalidRequestError, OAuth2Error

from app.accounts.principal import Principal
from app.db import Database
from app.errors import AppError, ServiceUnavailable
from app.oauth import clients, resources, scopes
from app.oauth.adapter import FORM, RegistrationRequest, Reply, Request, is_form
from app.oauth.clients import Client
from app.oauth.documents import ClientDocuments, DocumentError, looks_like_document_id
from app.oauth.server import EngramAuthorizationServer

# Parameters of the authorization request that the consent form carries back.
AUTHORIZE_PARAMS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
)


@dataclass(frozen=True)
class Consent:
    """What the consent page shows, and the request it will submit again."""

    client: Client
    scopes: list[tuple[str, str]]
    resource: str
    resource_label: str
    redirect_uri: str
    params: list[tuple[str, str]]

    @property
    def redirect_origin(self) -> str:
        parts = urlsplit(self.redirect_uri)
        return f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"

    @property
    def document_host(self) -> str | None:
        return urlsplit(self.client.client_id).netloc if self.client.from_document else None


class InvalidAuthorizationRequest(AppError):
    """Shown to the user as a page: the client cannot be told, as its identity or redirect URI is not trusted."""

    code = "invalid_request"


def form_error(request: Request) -> OAuth2Error | None:
    """What is wrong with a token, revocation or introspection request's body before its parameters are read."""
    if not is_form(request.headers.get("content-type")):
        return InvalidRequestError(f"the request body must be {FORM}")
    for name, values in request.payload.datalist.items():
        # RFC 6749 section 3.2; a repeated resource (RFC 8707) is answered with invalid_target by the grants.
        if len(values) > 1 and name != "resource":
            return InvalidRequestError(f"the parameter {name!r} must not be repeated")
    return None


def is_local_server(base: str) -> bool:
    """A development or test server: its public URL is plain http on a loopback host."""
    return base.startswith("http://") and clients.is_loopback_host(urlsplit(base).hostname)


class OAuthService:
    """One per app, created in the lifespan (it owns an HTTP client for client metadata documents)."""

    def __init__(self, db: Database, base: str, http: httpx.AsyncClient) -> None:
        self.db = db
        self.base = base
        self.documents = ClientDocuments(http, allow_loopback_http=is_local_server(base))
        self.server = EngramAuthorizationServer(base, self.documents)

    def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, list[str]],
        form: Mapping[str, list[str]] | None = None,
    ) -> Request:
        # The public URL, not the one the proxy forwarded: authlib refuses plain http except on loopback.
        try:
            return Request(method, self.base + path, headers, query, form)
        except InsecureTransportError:
            raise ServiceUnavailable("OAuth needs an https public URL (ENGRAM_PUBLIC_BASE_URL)") from None

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata."""
        return self.server.metadata()

    def protected_resource(self, resource_url: str) -> dict[str, Any] | None:
        """RFC 9728 metadata for a resource on this server, or None when there is no such resource."""
        resource = resources.parse(self.base, resource_url)
        if resource is None:
            return None
        if resource.sync:
            name = "Engram edge sync"
        else:
            name = "Engram memory" + (" (MCP)" if resource.user_id else " (REST API)")
        return {
            "resource": resource.url,
            "authorization_servers": [self.base],
            "scopes_supported": list(scopes.on_resource(resource.sync)),
            "bearer_methods_supported": ["header"],
            "resource_name": name,
            "resource_documentation": f"{self.base}/docs",
        }

    async def _prefetch_client(self, client_id: str | None) -> str | None:
        """Fetch a metadata document before authlib (which is synchronous) looks the client up; the problem, if any."""
        if client_id and looks_like_document_id(client_id):
            try:
                await self.documents.resolve(client_id)
            except DocumentError as exc:
                return str(exc)
        return None

    async def register(self, headers: Mapping[str, str], body: Any, registrant: Principal | None) -> Reply:
        """RFC 7591 dynamic client registration."""
        request = RegistrationRequest(f"{self.base}/oauth/register", headers, body, registrant)
        async with self.db.session() as session:
            reply: Reply = await self.server.run(
                session, lambda: self.server.create_endpoint_response("client_registration", request)
            )
        return reply

    async def consent(self, request: Request, user_id: str) -> Consent | Reply:
        """Validate an authorization request for the consent page: what to show, or where to send the browser."""
        problem = await self._prefetch_client(request.payload.client_id)
        if problem:
            raise InvalidAuthorizationRequest(f"the client's metadata document cannot be used: {problem}")
        request.user = user_id

        def validate() -> Reply | None:
            try:
                self.server.get_consent_grant(request, end_user=user_id)
            except OAuth2Error as error:
                if error.redirect_uri:
                    reply: Reply = self.server.handle_error_response(request, error)
                    return reply
                raise InvalidAuthorizationRequest(
                    f"this authorization request cannot be used: {error.description or error.error}"
                ) from None
            return None

        async with self.db.session() as session:
            redirect = await self.server.run(session, validate)
        if redirect is not None:
            return redirect.with_issuer(self.base)
        assert request.resource is not None and request.client is not None
        resource = request.resource
        if resource.user_id is None:
            label = "the Engram REST API"
        else:
            label = f"the MCP endpoint {resource.url[len(self.base) :]}"
        granted = scopes.split(request.scope)
        return Consent(
            client=request.client,
            scopes=[(s, scopes.DESCRIPTIONS[s]) for s in granted],
            resource=resource.url,
            resource_label=label,
            redirect_uri=request.payload.redirect_uri or request.client.get_default_redirect_uri() or "",
            params=[(k, request.payload.data[k]) for k in AUTHORIZE_PARAMS if k in request.payload.data],
        )

    async def decide(self, request: Request, user_id: str, approve: bool) -> Reply:
        """The user approved or denied: redirect to the client with a code or with access_denied."""
        problem = await self._prefetch_client(request.payload.client_id)
        if problem:
            raise InvalidAuthorizationRequest(f"the client's metadata document cannot be used: {problem}")
        request.user = user_id

        def respond() -> Reply:
            try:
                grant = self.server.get_consent_grant(request, end_user=user_id)
            except OAuth2Error as error:
                if error.redirect_uri:
                    reply: Reply = self.server.handle_error_response(request, error)
                    return reply
                raise InvalidAuthorizationRequest(
                    f"this authorization request cannot be used: {error.description or error.error}"
                ) from None
            result: Reply = self.server.create_authorization_response(
                request, grant_user=user_id if approve else None, grant=grant
            )
            return result

        async with self.db.session() as session:
            reply = await self.server.run(session, respond)
        return reply.with_issuer(self.base)

    def _refuse_form(self, request: Request) -> Reply | None:
        error = form_error(request)
        if error is None:
            return None
        reply: Reply = self.server.handle_error_response(request, error)
        return reply

    async def token(self, request: Request) -> Reply:
        """The token endpoint: authorization_code, refresh_token, client_credentials and device_code."""
        if refused := self._refuse_form(request):
            return refused
        await self._prefetch_client(request.form.get("client_id"))
        async with self.db.session() as session:
            reply: Reply = await self.server.run(session, lambda: self.server.create_token_response(request))
        return reply

    async def device_authorization(self, request: Request) -> Reply:
        """RFC 8628 section 3.1: a device code and a user code for the sync resource."""
        if refused := self._refuse_form(request):
            return refused
        async with self.db.session() as session:
            reply: Reply = await self.server.run(
                session, lambda: self.server.create_endpoint_response("device_authorization", request)
            )
        return reply

    async def revoke(self, request: Request) -> Reply:
        """RFC 7009 revocation."""
        if refused := self._refuse_form(request):
            return refused
        await self._prefetch_client(request.form.get("client_id"))
        async with self.db.session() as session:
            reply: Reply = await self.server.run(
                session, lambda: self.server.create_endpoint_response("revocation", request)
            )
        return reply

    async def introspect(self, request: Request) -> Reply:
        """RFC 7662 introspection, for confidential clients."""
        if refused := self._refuse_form(request):
            return refused
        async with self.db.session() as session:
            reply: Reply = await self.server.run(
                session, lambda: self.server.create_endpoint_response("introspection", request)
            )
        return reply
