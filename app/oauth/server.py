"""authlib's framework-neutral authorization server, adapted to Litestar and to the async database.

authlib is synchronous and calls back into storage hooks (query_client, save_token, ...) in the middle of its own
logic. Each call runs inside ``AsyncSession.run_sync``: SQLAlchemy runs the function in a greenlet on the event loop
and hands it a synchronous ``Session`` whose I/O goes through the async driver (asyncpg or aiosqlite). So the hooks
are plain synchronous SQLAlchemy, there is no second engine or thread, the request's one transaction covers every
hook, and it commits when the request's unit of work ends, including after an error response (code and refresh
token reuse must revoke tokens *and* answer with an error). Remote work (fetching a client metadata document) is done
asynchronously before authlib runs; authlib then finds the result in the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from authlib.oauth2.rfc6749 import AuthorizationServer, InvalidScopeError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.db import utcnow
from app.oauth import credentials, flows, repository, scopes
from app.oauth.adapter import Reply, Request, T, db, session_var
from app.oauth.clients import Client
from app.oauth.device import DeviceAuthorization, DeviceGrant
from app.oauth.documents import ClientDocuments, looks_like_document_id
from app.oauth.endpoints import Introspection, Registration, Revocation
from app.oauth.grants import ACCESS_TTL, REFRESH_TTL, CodeGrant, MachineGrant, RefreshGrant, S256Required
from app.oauth.models import OAuthCode, OAuthDeviceCode, OAuthToken


class EngramAuthorizationServer(AuthorizationServer):
    """authlib's server with Engram's storage hooks; ``run`` is the bridge to the async database."""

    def __init__(self, base: str, documents: ClientDocuments) -> None:
        super().__init__(scopes_supported=list(scopes.SUPPORTED))
        self.base = base
        self.documents = documents
        self.register_token_generator("default", self._generate_token)
        self.register_grant(CodeGrant, [S256Required(required=True)])
        self.register_grant(RefreshGrant)
        self.register_grant(MachineGrant)
        self.register_grant(DeviceGrant)
        self.register_endpoint(DeviceAuthorization)
        self.register_endpoint(Revocation)
        self.register_endpoint(Introspection)
        self.register_endpoint(Registration)

    async def run(self, session: AsyncSession, fn: Callable[[], T]) -> T:
        """Call authlib with the request's session available to the storage hooks."""

        def call(sync_session: Session) -> T:
            token = session_var.set(sync_session)
            try:
                return fn()
            finally:
                session_var.reset(token)

        return await session.run_sync(call)

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 metadata."""
        base = self.base
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "introspection_endpoint": f"{base}/oauth/introspect",
            "device_authorization_endpoint": f"{base}/oauth/device_authorization",
            "scopes_supported": list(scopes.SUPPORTED),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": [*flows.CODE_GRANTS, flows.MACHINE_GRANT, flows.DEVICE_GRANT],
            "token_endpoint_auth_methods_supported": list(flows.AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(flows.AUTH_METHODS),
            "introspection_endpoint_auth_methods_supported": list(flows.SECRET_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": True,
            "service_documentation": f"{base}/docs",
        }

    def query_client(self, client_id: str) -> Client | None:
        if looks_like_document_id(client_id):
            return self.documents.cached(client_id)
        row = repository.get_client(db(), client_id)
        if row is None:
            return None
        return Client(row.id, row.client_metadata, row.secret_hash, row.owner_id)

    def _generate_token(
        self,
        grant_type: str,
        client: Client,
        user: Any = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        granted = scopes.join(scopes.split(scope))
        if not granted:
            # A token without a scope would be refused wherever it is used (see verifier): never issue one. Which
            # scopes go with which resource is checked by the grants (grants.ResourceBound).
            raise InvalidScopeError(f"a token needs {', '.join(scopes.MEMORIES)} or {scopes.SYNC}")
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": credentials.new_access_token(),
            "expires_in": int(ACCESS_TTL.total_seconds()),
            "scope": granted,
        }
        if include_refresh_token:
            token["refresh_token"] = credentials.new_refresh_token()
        return token

    def save_token(self, token: dict[str, Any], request: Request) -> None:
        grant_type = request.payload.grant_type
        if grant_type == "authorization_code":
            source: OAuthCode | OAuthDeviceCode | OAuthToken = request.authorization_code.row
            family, resource = source.family_id, source.resource
        elif grant_type == "refresh_token":
            source = request.refresh_token.row
            family, resource = source.family_id, source.resource
        elif grant_type == flows.DEVICE_GRANT:
            source = request.credential.row
            family, resource = source.family_id, source.resource
            grant_type = "device_code"  # the URN is longer than the column
        else:
            assert request.resource is not None
            family, resource = credentials.new_id("fam_"), request.resource.url
        now = utcnow()
        refresh = token.get("refresh_token")
        repository.add(
            db(),
            OAuthToken(
                id=credentials.new_id("tok_"),
                family_id=family,
                client_id=request.client.client_id,
                user_id=str(request.user),
                grant_type=grant_type,
                scope=token.get("scope") or "",
                resource=resource,
                access_hash=credentials.digest(token["access_token"]),
                access_expires_at=now + ACCESS_TTL,
                refresh_hash=credentials.digest(refresh) if refresh else None,
                refresh_expires_at=now + REFRESH_TTL if refresh else None,
                created_at=now,
            ),
        )

    def create_oauth2_request(self, request: Any) -> Any:
        return request

    def create_json_request(self, request: Any) -> Any:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Reply:
        return Reply(status, body, list(headers or []))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None
