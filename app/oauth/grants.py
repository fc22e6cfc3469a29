"""The grants Engram allows: authorization code (PKCE S256 always), refresh (rotated, reuse revokes the family) and
client credentials (a machine client acting as the user who owns it). The device grant is in ``device``.

Every grant binds its tokens to one resource (``request.resource``) and issues only that resource's scopes: the
memories scopes for ``/v1`` and MCP URLs, ``sync`` for the sync resource."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from authlib.oauth2.rfc6749 import (
    AuthorizationCodeMixin,
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    OAuth2Request,
    TokenMixin,
    grants,
)
from authlib.oauth2.rfc7636 import CodeChallenge

from app.db import utcnow
from app.oauth import credentials, repository, resources, scopes
from app.oauth.adapter import InvalidTargetError, Request, ServerView, db
from app.oauth.clients import Client
from app.oauth.models import OAuthCode, OAuthToken

ACCESS_TTL = timedelta(hours=1)
REFRESH_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=10)


class CodeRecord(AuthorizationCodeMixin):
    def __init__(self, row: OAuthCode) -> None:
        self.row = row
        self.code_challenge = row.code_challenge
        self.code_challenge_method = "S256"

    def get_redirect_uri(self) -> str:
        return self.row.redirect_uri

    def get_scope(self) -> str:
        return self.row.scope


class TokenRecord(TokenMixin):
    def __init__(self, row: OAuthToken, kind: str) -> None:
        self.row = row
        self.kind = kind

    def check_client(self, client: Client) -> bool:
        return self.row.client_id == client.client_id

    def get_scope(self) -> str:
        return self.row.scope

    def get_expires_in(self) -> int:
        return int(ACCESS_TTL.total_seconds())

    def is_expired(self) -> bool:
        expires = self.row.access_expires_at if self.kind == "access_token" else self.row.refresh_expires_at
        return expires is None or expires <= utcnow()

    def is_revoked(self) -> bool:
        return self.row.revoked_at is not None or (
            self.kind == "refresh_token" and self.row.refresh_used_at is not None
        )


class ResourceBound(grants.BaseGrant):
    """Put first in a grant's bases: no token leaves without a resource, or with a scope of another resource."""

    def generate_token(
        self,
        user: Any = None,
        scope: str | None = None,
        grant_type: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        resource: resources.Resource | None = self.request.resource
        if resource is None:
            raise InvalidTargetError("this grant is bound to no resource this server protects")
        allowed = scopes.on_resource(resource.sync)
        if not set(scopes.split(scope)) <= set(allowed):
            raise InvalidScopeError(f"a token for {resource.url} may only have {' '.join(allowed)}")
        token: dict[str, Any] = super().generate_token(user, scope, grant_type, expires_in, include_refresh_token)
        return token


def bound_resource(base: str, url: str) -> resources.Resource:
    """The resource a stored code or token is bound to; invalid_grant once this server no longer serves it."""
    resource = resources.parse(base, url)
    if resource is None:
        raise InvalidGrantError(f"this grant is for {url}, which this server no longer serves")
    return resource


def resource_param(request: OAuth2Request) -> str | None:
    values = request.payload.datalist.get("resource", [])
    if len(values) > 1:
        raise InvalidTargetError("Engram binds each grant to exactly one resource")
    return values[0] if values else None


def same_resource(base: str, requested: str | None, bound: str) -> None:
    parsed = resources.parse(base, requested) if requested is not None else None
    if requested is not None and (parsed is None or parsed.url != bound):
        raise InvalidTargetError("the resource differs from the one this grant was issued for")


class S256Required(CodeChallenge):
    """PKCE on every authorization request, from every client, with S256 only (authlib allows plain and none)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant: grants.AuthorizationCodeGrant, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge_method must be S256")
        super().validate_code_challenge(grant, redirect_uri)

    def validate_code_verifier(self, grant: grants.AuthorizationCodeGrant, result: Any) -> None:
        if not grant.request.form.get("code_verifier"):
            raise InvalidRequestError("Missing 'code_verifier'")
        super().validate_code_verifier(grant, result)


class CodeGrant(ResourceBound, grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    server: ServerView

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        request: Request = self.request
        requested = resource_param(request) or resources.api_resource(self.server.base)
        resource = resources.allowed_for(self.server.base, requested, str(request.user))
        if resource is None or resource.sync:
            # The sync resource is granted by the device flow and to sync clients, never through a browser redirect.
            raise InvalidTargetError(
                "resource must be this server's /v1 or one of your own MCP URLs", redirect_uri=redirect_uri
            )
        request.resource = resource
        return redirect_uri

    def save_authorization_code(self, code: str, request: Request) -> None:
        assert request.resource is not None
        now = utcnow()
        repository.add(
            db(),
            OAuthCode(
                id=credentials.digest(code),
                client_id=request.client.client_id,
                user_id=str(request.user),
                redirect_uri=request.payload.redirect_uri or "",
                scope=request.scope or "",
                resource=request.resource.url,
                code_challenge=request.payload.data["code_challenge"],
                family_id=credentials.new_id("fam_"),
                created_at=now,
                expires_at=now + CODE_TTL,
            ),
        )

    def query_authorization_code(self, code: str, client: Client) -> CodeRecord | None:
        row = repository.code_by_hash(db(), credentials.digest(code), client.client_id)
        if row is None:
            return None
        if row.used_at is not None:
            repository.revoke_family(db(), row.family_id, utcnow())
            raise InvalidGrantError("this code was already used; the tokens issued for it are revoked")
        if row.expires_at <= utcnow():
            return None
        same_resource(self.server.base, resource_param(self.request), row.resource)
        self.request.resource = bound_resource(self.server.base, row.resource)
        return CodeRecord(row)

    def authenticate_user(self, authorization_code: CodeRecord) -> str:
        return authorization_code.row.user_id

    def delete_authorization_code(self, authorization_code: CodeRecord) -> None:
        row = authorization_code.row
        if not repository.consume_code(db(), row.id, utcnow()):
            repository.revoke_family(db(), row.family_id, utcnow())
            raise InvalidGrantError("this code was already used; the tokens issued for it are revoked")


class RefreshGrant(ResourceBound, grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    # Rotation: every refresh returns a new refresh token and retires the old one.
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: ServerView

    def authenticate_refresh_token(self, refresh_token: str) -> TokenRecord | None:
        row = repository.token_by_refresh_hash(db(), credentials.digest(refresh_token))
        if row is None:
            return None
        if row.refresh_used_at is not None:
            repository.revoke_family(db(), row.family_id, utcnow())
            raise InvalidGrantError("refresh token reuse detected; every token of this grant is revoked")
        record = TokenRecord(row, "refresh_token")
        if record.is_revoked() or record.is_expired():
            return None
        same_resource(self.server.base, resource_param(self.request), row.resource)
        self.request.resource = bound_resource(self.server.base, row.resource)
        return record

    def authenticate_user(self, refresh_token: TokenRecord) -> str:
        return refresh_token.row.user_id

    # RFC 6749 section 6: an omitted scope means the one granted; authlib would take a blank one (" ") literally.
    def _validate_token_scope(self, token: TokenRecord) -> None:
        if not set(scopes.split(self.request.payload.scope)) <= set(scopes.split(token.get_scope())):
            raise InvalidScopeError("the scope may not include anything the grant does not have")

    def issue_token(self, user: str, refresh_token: TokenRecord) -> dict[str, Any]:
        scope = scopes.join(scopes.split(self.request.payload.scope)) or refresh_token.get_scope()
        token: dict[str, Any] = self.generate_token(
            user=user, scope=scope, include_refresh_token=self.INCLUDE_NEW_REFRESH_TOKEN
        )
        return token

    def revoke_old_credential(self, refresh_token: TokenRecord) -> None:
        row = refresh_token.row
        if not repository.rotate_refresh(db(), row.id, utcnow()):
            repository.revoke_family(db(), row.family_id, utcnow())
            raise InvalidGrantError("refresh token reuse detected; every token of this grant is revoked")


class MachineGrant(ResourceBound, grants.ClientCredentialsGrant):
    """client_credentials: a confidential client acts as the user who owns it, within its scopes. A sync client
    (scope ``sync``, made by ``engram sync clients create`` or the dashboard) gets tokens for the sync resource."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: ServerView

    def validate_token_request(self) -> None:
        super().validate_token_request()
        request: Request = self.request
        client: Client = request.client
        if repository.registering_key_revoked(db(), client.client_id):
            raise InvalidClientError(
                description="the API key that registered this client has been revoked; register a new client"
            )
        client_scope = client.metadata.get("scope")
        is_sync_client = scopes.split(client_scope) == [scopes.SYNC]
        base = self.server.base
        default = resources.sync_resource(base) if is_sync_client else resources.api_resource(base)
        resource = resources.allowed_for(base, resource_param(request) or default, str(client.owner_id))
        if resource is None:
            where = "the sync resource" if is_sync_client else "this server's /v1 or one of the owner's MCP URLs"
            raise InvalidTargetError(f"resource must be {where}")
        allowed = scopes.split(scopes.grantable(None, client_scope, resource.sync))
        if not allowed or not set(scopes.split(request.payload.scope)) <= set(allowed):
            raise InvalidScopeError(f"on {resource.url} this client may have {' '.join(allowed) or 'no scope'}")
        request.resource = resource
        request.scope = scopes.grantable(request.payload.scope, client_scope, resource.sync)

    def create_token_response(self) -> tuple[int, Any, Any]:
        client: Client = self.request.client
        self.request.user = client.owner_id
        token = self.generate_token(user=client.owner_id, scope=self.request.scope, include_refresh_token=False)
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER
