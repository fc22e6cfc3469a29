"""The device authorization grant (RFC 8628), which links an Engram node for sync.

The node registers a client named after itself (RFC 7591, grant types device_code and refresh_token, scope ``sync``),
asks ``/oauth/device_authorization`` for a device code and a user code, and shows the user code with the
verification URL. A person logged in on this server opens ``/device`` (``device_pages``), sees the device's name and
approves or denies. Meanwhile the node polls the token endpoint with the device code: authorization_pending,
slow_down when it polls faster than its interval (which then grows by 5 s), access_denied, expired_token, or tokens
for the sync resource with scope ``sync`` (refresh tokens rotate as in the code grant).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from authlib.consts import default_json_headers
from authlib.oauth2.rfc6749 import (
    AccessDeniedError,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc8628 import (
    AuthorizationPendingError,
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialMixin,
    ExpiredTokenError,
    SlowDownError,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.oauth import credentials, flows, repository, resources, scopes
from app.oauth.adapter import InvalidTargetError, Request, ServerView, db
from app.oauth.clients import Client
from app.oauth.grants import ResourceBound, bound_resource, resource_param, same_resource
from app.oauth.models import OAuthDeviceCode

CODE_TTL = timedelta(minutes=15)
INTERVAL_SECONDS = 5
SLOW_DOWN_SECONDS = 5
VERIFICATION_PATH = "/device"
# RFC 8628 section 6.1: 8 characters from 20 consonants (no vowels, so no words; no look-alikes), about 34 bits.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
APPROVED = "approved"
DENIED = "denied"


def normalise_user_code(raw: str) -> str | None:
    """The code as stored (upper case, no dash or spaces), or None when it cannot be a user code at all."""
    code = "".join(c for c in raw.upper() if c not in " -")
    if len(code) != USER_CODE_LENGTH or any(c not in USER_CODE_ALPHABET for c in code):
        return None
    return code


def display_user_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


def user_code_hash(code: str) -> str:
    return credentials.digest("user-code:" + code)


class DeviceRecord(DeviceCredentialMixin):
    def __init__(self, row: OAuthDeviceCode) -> None:
        self.row = row

    def get_client_id(self) -> str:
        return self.row.client_id

    def get_scope(self) -> str:
        return self.row.scope

    def get_user_code(self) -> str:
        return self.row.user_code

    def is_expired(self) -> bool:
        return self.row.expires_at <= utcnow()


class DeviceAuthorization(DeviceAuthorizationEndpoint):
    """``POST /oauth/device_authorization``: for the sync resource only, with scope ``sync``."""

    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    EXPIRES_IN = int(CODE_TTL.total_seconds())
    INTERVAL = INTERVAL_SECONDS
    server: ServerView

    def get_verification_uri(self) -> str:
        return self.server.base + VERIFICATION_PATH

    def create_endpoint_response(self, request: Request) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        client: Client = self.authenticate_client(request)
        if not client.check_grant_type(flows.DEVICE_GRANT):
            raise UnauthorizedClientError(f"this client is not registered for the {flows.DEVICE_GRANT} grant")
        base = self.server.base
        requested = resource_param(request) or resources.sync_resource(base)
        resource = resources.parse(base, requested)
        if resource is None or not resource.sync:
            raise InvalidTargetError(f"the device grant is for this server's sync resource, {base}/sync/v1")
        scope = scopes.grantable(request.payload.scope, client.metadata.get("scope"), sync=True)
        if scope is None or not set(scopes.split(request.payload.scope)) <= {scopes.SYNC}:
            raise InvalidScopeError(f"the device grant gives {scopes.SYNC}, to clients registered with that scope")
        device_code = credentials.new_code()
        user_code = self._new_user_code()
        now = utcnow()
        repository.add(
            db(),
            OAuthDeviceCode(
                id=credentials.digest(device_code),
                user_code=user_code_hash(user_code),
                client_id=client.client_id,
                scope=scope,
                resource=resource.url,
                family_id=credentials.new_id("fam_"),
                created_at=now,
                expires_at=now + CODE_TTL,
                interval=self.INTERVAL,
            ),
        )
        shown = display_user_code(user_code)
        uri = self.get_verification_uri()
        body = {
            "device_code": device_code,
            "user_code": shown,
            "verification_uri": uri,
            "verification_uri_complete": f"{uri}?user_code={shown}",
            "expires_in": self.EXPIRES_IN,
            "interval": self.INTERVAL,
        }
        return 200, body, [*default_json_headers, ("Cache-Control", "no-store")]

    @staticmethod
    def _new_user_code() -> str:
        # A clash with a live code is about one in 10^10; try again rather than fail the insert.
        while True:
            code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))
            if not repository.user_code_taken(db(), user_code_hash(code)):
                return code


class DeviceGrant(ResourceBound, DeviceCodeGrant):
    """The token endpoint's side: polls answered by the state of the request, tokens issued once."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    server: ServerView

    def validate_token_request(self) -> None:
        request: Request = self.request
        device_code = request.form.get("device_code")
        if not device_code:
            raise InvalidRequestError("missing 'device_code'")
        client: Client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError(f"this client is not registered for the {flows.DEVICE_GRANT} grant")
        row = repository.device_by_hash(db(), credentials.digest(device_code))
        if row is None or row.client_id != client.client_id:
            raise InvalidGrantError("unknown device_code")
        same_resource(self.server.base, resource_param(request), row.resource)
        request.resource = bound_resource(self.server.base, row.resource)
        request.client = client
        request.credential = DeviceRecord(row)
        request.user = self.validate_device_credential(request.credential)

    def validate_device_credential(self, credential: DeviceRecord) -> str:
        row = credential.row
        now = utcnow()
        if row.used_at is not None:
            raise InvalidGrantError("this device code was already exchanged for tokens")
        if row.expires_at <= now:
            raise ExpiredTokenError("the device code has expired: start linking again")
        if row.decision == DENIED:
            raise AccessDeniedError("the request was denied on the verification page")
        if row.decision == APPROVED and row.user_id is not None:
            return row.user_id
        too_soon = row.polled_at is not None and now - row.polled_at < timedelta(seconds=row.interval)
        # Kept even though an error is returned: the request's transaction commits either way (see server).
        row.polled_at = now
        if too_soon:
            row.interval += SLOW_DOWN_SECONDS
            raise SlowDownError(f"polled too soon: wait at least {row.interval} s between polls from now on")
        raise AuthorizationPendingError("waiting for a person to approve the user code on the verification page")

    def create_token_response(self) -> tuple[int, dict[str, Any], Any]:
        row: OAuthDeviceCode = self.request.credential.row
        if not repository.consume_device_code(db(), row.id, utcnow()):
            raise InvalidGrantError("this device code was already exchanged for tokens")
        client: Client = self.request.client
        token: dict[str, Any] = self.generate_token(
            user=self.request.user, scope=row.scope, include_refresh_token=client.check_grant_type("refresh_token")
        )
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER


@dataclass(frozen=True, slots=True)
class PendingDevice:
    """What the verification page shows about a device waiting for approval."""

    user_code: str
    device_name: str
    client_id: str
    scope: str
    resource: str
    requested_at: datetime
    expires_at: datetime


def _device_name(client_id: str, metadata: dict[str, Any] | None) -> str:
    name = (metadata or {}).get("client_name")
    return name.strip() if isinstance(name, str) and name.strip() else client_id


async def find_pending(session: AsyncSession, code: str) -> PendingDevice | None:
    """The device request waiting for ``code`` (normalised), or None when there is none to decide."""
    found = await repository.pending_device(session, user_code_hash(code), utcnow())
    if found is None:
        return None
    row, client = found
    if client is not None and client.revoked_at is not None:
        return None
    return PendingDevice(
        user_code=display_user_code(code),
        device_name=_device_name(row.client_id, client.client_metadata if client else None),
        client_id=row.client_id,
        scope=row.scope,
        resource=row.resource,
        requested_at=row.created_at,
        expires_at=row.expires_at,
    )


async def decide(session: AsyncSession, code: str, user_id: str, approve: bool) -> bool:
    """Approve or deny the pending request for ``code`` as ``user_id``; False when nothing was pending any more."""
    return await repository.decide_device(
        session, user_code_hash(code), user_id, APPROVED if approve else DENIED, utcnow()
    )
