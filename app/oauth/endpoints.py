"""Revocation (RFC 7009), introspection (RFC 7662) and dynamic client registration (RFC 7591)."""

from __future__ import annotations

from typing import Any

from authlib.oauth2.rfc6749 import OAuth2Error
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint, InvalidClientMetadataError
from authlib.oauth2.rfc7662 import IntrospectionEndpoint

from app.accounts.principal import WRITE, Principal
from app.db import utcnow
from app.oauth import clients, credentials, flows, repository, scopes
from app.oauth.adapter import RegistrationRequest, Request, ServerView, db
from app.oauth.clients import Client
from app.oauth.grants import TokenRecord
from app.oauth.models import OAuthClient


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> TokenRecord | None:
        return _find_token(token_string)

    def revoke_token(self, token: TokenRecord, request: Request) -> None:
        # Revoking a refresh token ends the whole grant (RFC 7009 section 2.1); an access token just itself.
        if token.kind == "refresh_token":
            repository.revoke_family(db(), token.row.family_id, utcnow())
        else:
            repository.revoke_token(db(), token.row.id, utcnow())


class Introspection(IntrospectionEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    server: ServerView

    def query_token(self, token_string: str, token_type_hint: str | None) -> TokenRecord | None:
        return _find_token(token_string)

    def check_permission(self, token: TokenRecord, client: Client, request: Request) -> bool:
        """A client may introspect its own tokens, and a user's machine client that user's tokens."""
        return token.row.client_id == client.client_id or (
            client.owner_id is not None and client.owner_id == token.row.user_id
        )

    def introspect_token(self, token: TokenRecord) -> dict[str, Any]:
        row = token.row
        expires = row.access_expires_at if token.kind == "access_token" else row.refresh_expires_at
        return {
            "active": True,
            "client_id": row.client_id,
            "token_type": "Bearer" if token.kind == "access_token" else "refresh_token",
            "scope": row.scope,
            "sub": row.user_id,
            "aud": row.resource,
            "iss": self.server.base,
            "exp": int(expires.timestamp()) if expires else None,
            "iat": int(row.created_at.timestamp()),
        }


def _find_token(value: str) -> TokenRecord | None:
    if value.startswith(credentials.REFRESH_PREFIX):
        row = repository.token_by_refresh_hash(db(), credentials.digest(value))
        return TokenRecord(row, "refresh_token") if row else None
    if value.startswith(credentials.ACCESS_PREFIX):
        row = repository.token_by_access_hash(db(), credentials.digest(value))
        return TokenRecord(row, "access_token") if row else None
    return None


class MachineClientRefused(OAuth2Error):
    """Only an API key (or the owner, through the CLI or the dashboard) makes a machine client: one made with an OAuth
    access token would outlive the grant behind that token."""

    error = "access_denied"
    status_code = 403


class _ClientClaims(ClientMetadataClaims):
    def validate_redirect_uris(self) -> None:
        # clients.metadata_problem applied Engram's rules already; authlib's would refuse every RFC 8252 private-use
        # scheme redirect (com.example.app:/cb has no host) with a bare "Invalid claim".
        return None


class Registration(ClientRegistrationEndpoint):
    """RFC 7591. Anyone may register a client that needs a user's consent; a client_credentials client acts as a
    user, so registering one needs that user's API key (an RFC 7591 initial access token)."""

    server: ServerView

    def __init__(self, server: ServerView) -> None:
        super().__init__(server, claims_classes=[_ClientClaims])

    def authenticate_token(self, request: RegistrationRequest) -> object:
        return request.registrant or "anonymous"

    def get_server_metadata(self) -> dict[str, Any]:
        return self.server.metadata()

    def extract_client_metadata(self, request: RegistrationRequest) -> dict[str, Any]:
        if not request.is_object:
            raise InvalidClientMetadataError("the registration request must be a JSON object")
        problem = clients.metadata_problem(request.payload.data)
        if problem:
            raise InvalidClientMetadataError(problem)
        metadata: dict[str, Any] = super().extract_client_metadata(request)
        _check_registration(metadata, request.registrant)
        request.client_metadata = metadata
        return metadata

    def generate_client_id(self, request: RegistrationRequest) -> str:
        return credentials.new_client_id()

    def generate_client_secret(self, request: RegistrationRequest) -> str | None:
        if request.client_metadata.get("token_endpoint_auth_method") == flows.PUBLIC:
            return None
        return credentials.new_client_secret()

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: RegistrationRequest
    ) -> Client:
        secret = client_info.get("client_secret")
        grants_ = client_metadata.get("grant_types") or []
        registrant = request.registrant if flows.MACHINE_GRANT in grants_ else None
        row = OAuthClient(
            id=client_info["client_id"],
            secret_hash=credentials.digest(secret) if secret else None,
            owner_id=registrant.user_id if registrant else None,
            client_metadata=client_metadata,
            registered_with_key=registrant.key_id if registrant and registrant.via == "api_key" else None,
        )
        owner = row.owner_id
        repository.add(db(), row)
        return Client(row.id, client_metadata, row.secret_hash, owner)

    def create_registration_response(self, request: RegistrationRequest) -> tuple[int, Any, Any]:
        status, body, headers = super().create_registration_response(request)
        # The MCP TypeScript SDK rejects "client_secret": null: a public client gets no secret fields at all.
        if body.get("client_secret") is None:
            body.pop("client_secret", None)
            body.pop("client_secret_expires_at", None)
        return status, {k: v for k, v in body.items() if v is not None}, headers


def _check_registration(metadata: dict[str, Any], registrant: Principal | None) -> None:
    method = metadata.setdefault("token_endpoint_auth_method", "client_secret_basic")
    if method not in flows.AUTH_METHODS:
        raise InvalidClientMetadataError(f"token_endpoint_auth_method must be one of {', '.join(flows.AUTH_METHODS)}")
    grant_types = metadata.setdefault("grant_types", ["authorization_code"])
    if not set(grant_types) <= {*flows.CODE_GRANTS, flows.MACHINE_GRANT, flows.DEVICE_GRANT}:
        raise InvalidClientMetadataError(
            f"grant_types may be authorization_code, refresh_token, client_credentials and {flows.DEVICE_GRANT}"
        )
    if flows.DEVICE_GRANT in grant_types and flows.MACHINE_GRANT in grant_types:
        raise InvalidClientMetadataError("a client is either a device (device_code) or a machine (client_credentials)")
    metadata.setdefault("response_types", ["code"] if "authorization_code" in grant_types else [])
    if "authorization_code" in grant_types and not metadata.get("redirect_uris"):
        raise InvalidClientMetadataError("redirect_uris are required for the authorization_code grant")
    if flows.MACHINE_GRANT in grant_types:
        if scopes.SYNC in scopes.split(metadata.get("scope")):
            raise InvalidClientMetadataError(
                "a client_credentials client with the sync scope is made on the server (`engram sync clients create`) "
                "or on the dashboard (Link a machine); an API key never acts on the sync resource"
            )
        if method == flows.PUBLIC:
            raise InvalidClientMetadataError("a client_credentials client must be confidential")
        if registrant is None:
            raise InvalidClientMetadataError(
                "registering a client_credentials client needs 'Authorization: Bearer <API key>' of the user it acts as"
            )
        if registrant.via != "api_key":
            raise MachineClientRefused(
                "an OAuth access token cannot register a client_credentials client; use an API key "
                "(or `engram oauth clients` / the dashboard)"
            )
        if WRITE not in registrant.scopes:
            # No scope would mean every scope: a read-only key's client gets memories:read unless it asks otherwise.
            if not scopes.split(metadata.get("scope")):
                metadata["scope"] = scopes.MEMORIES_READ
            if scopes.MEMORIES_WRITE in scopes.split(metadata["scope"]):
                raise InvalidClientMetadataError("a read-only key can only register a client with scope memories:read")
