"""Machine (client_credentials) clients: each acts as one user, who can list them and revoke any of them.

Most are registered with an API key (RFC 7591, ``endpoints.Registration``); sync clients (scope ``sync``, tokens for
the sync resource) are made here, by the owner on the server (``engram sync clients create``) or on the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts import service as accounts
from app.accounts.models import ApiKey
from app.accounts.revocations import note_revoked
from app.db import utcnow
from app.errors import NotFound, ValidationFailed
from app.oauth import credentials, flows, scopes
from app.oauth.models import OAuthClient, OAuthToken

MAX_NAME = 100


@dataclass(frozen=True, slots=True)
class NewClient:
    """A client just made: the secret is here and nowhere else (only its hash is stored)."""

    client_id: str
    client_secret: str
    name: str

    def as_json(self) -> dict[str, str]:
        return {"client_id": self.client_id, "client_secret": self.client_secret}


@dataclass(frozen=True, slots=True)
class MachineClient:
    client_id: str
    name: str
    scope: str
    created_at: datetime
    registered_with_key: str | None
    key_name: str | None
    last_token_at: datetime | None
    revoked_at: datetime | None

    @property
    def status(self) -> str:
        return "revoked" if self.revoked_at is not None else "active"

    def as_json(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "client_id": self.client_id,
            "name": self.name,
            "scope": self.scope,
            "status": self.status,
            "registered_with_key": self.registered_with_key,
            "key_name": self.key_name,
            "created_at": iso(self.created_at),
            "last_token_at": iso(self.last_token_at),
            "revoked_at": iso(self.revoked_at),
        }


def _clean_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise ValidationFailed(f"name must be 1-{MAX_NAME} characters", field="name")
    if any(not c.isprintable() for c in name):
        raise ValidationFailed("name must not contain control characters", field="name")
    return name


async def create_sync_client(session: AsyncSession, user_id: str, name: str) -> NewClient:
    """A confidential client_credentials client that acts as ``user_id`` with scope ``sync`` on the sync resource."""
    name = _clean_name(name)
    await accounts.require_user(session, user_id)
    secret = credentials.new_client_secret()
    row = OAuthClient(
        id=credentials.new_client_id(),
        secret_hash=credentials.digest(secret),
        owner_id=user_id,
        client_metadata={
            "client_name": name,
            "grant_types": [flows.MACHINE_GRANT],
            "response_types": [],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": scopes.SYNC,
        },
        created_at=utcnow(),
    )
    session.add(row)
    await session.flush()
    return NewClient(row.id, secret, name)


async def list_for(session: AsyncSession, user_id: str) -> list[MachineClient]:
    """Every machine client that acts as ``user_id``, revoked ones too, newest first."""
    last_token = (
        select(OAuthToken.client_id, func.max(OAuthToken.created_at).label("last"))
        .where(OAuthToken.user_id == user_id)
        .group_by(OAuthToken.client_id)
        .subquery()
    )
    query = (
        select(OAuthClient, ApiKey.name, last_token.c.last)
        .outerjoin(ApiKey, ApiKey.id == OAuthClient.registered_with_key)
        .outerjoin(last_token, last_token.c.client_id == OAuthClient.id)
        .where(OAuthClient.owner_id == user_id)
        .order_by(OAuthClient.created_at.desc(), OAuthClient.id)
    )
    out: list[MachineClient] = []
    for client, key_name, last in (await session.execute(query)).all():
        metadata = client.client_metadata or {}
        name = metadata.get("client_name")
        out.append(
            MachineClient(
                client_id=client.id,
                name=name if isinstance(name, str) and name.strip() else client.id,
                scope=str(metadata.get("scope") or ""),
                created_at=client.created_at,
                registered_with_key=client.registered_with_key,
                key_name=key_name,
                last_token_at=last,
                revoked_at=client.revoked_at,
            )
        )
    return out


async def revoke(session: AsyncSession, client_id: str, *, user_id: str | None = None) -> int:
    """Revoke a machine client (of that user, when given) and every token it was issued; the number of tokens.

    NotFound when there is no such machine client; revoking one twice is harmless."""
    query = select(OAuthClient).where(OAuthClient.id == client_id, OAuthClient.owner_id.is_not(None))
    if user_id is not None:
        query = query.where(OAuthClient.owner_id == user_id)
    client = (await session.execute(query)).scalar_one_or_none()
    if client is None:
        raise NotFound(f"no machine client {client_id[:80]!r}")
    now = utcnow()
    if client.revoked_at is None:
        client.revoked_at = now
    note_revoked(session, client.owner_id)
    result = await session.execute(
        update(OAuthToken)
        .where(OAuthToken.client_id == client.id, OAuthToken.revoked_at.is_(None))
        .values(revoked_at=now),
        execution_options={"synchronize_session": False},
    )
    return int(getattr(result, "rowcount", 0) or 0)
