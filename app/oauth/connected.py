"""The OAuth grants a user has given, as the dashboard lists them ("connected apps"), and revoking one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.revocations import note_revoked
from app.db import utcnow
from app.errors import NotFound
from app.oauth.models import OAuthClient, OAuthToken


@dataclass(frozen=True, slots=True)
class Grant:
    """One consent (or machine client), across the tokens its refreshes issued."""

    family_id: str
    client_id: str
    client_name: str
    scope: str
    resource: str
    granted_at: datetime
    last_refreshed_at: datetime


async def active_grants(session: AsyncSession, user_id: str) -> list[Grant]:
    """The user's grants that can still be used (an unexpired access or refresh token), newest first."""
    now = utcnow()
    query = (
        select(OAuthToken, OAuthClient.client_metadata)
        .outerjoin(OAuthClient, OAuthClient.id == OAuthToken.client_id)
        .where(
            OAuthToken.user_id == user_id,
            OAuthToken.revoked_at.is_(None),
            or_(
                OAuthToken.access_expires_at > now,
                (OAuthToken.refresh_expires_at > now) & OAuthToken.refresh_used_at.is_(None),
            ),
        )
        .order_by(OAuthToken.created_at)
    )
    families: dict[str, Grant] = {}
    first_seen: dict[str, datetime] = {}
    for token, metadata in (await session.execute(query)).all():
        name = (metadata or {}).get("client_name")
        first_seen.setdefault(token.family_id, token.created_at)
        families[token.family_id] = Grant(
            family_id=token.family_id,
            client_id=token.client_id,
            # A metadata-document client has no row: its id is the document's URL, which says who it is.
            client_name=name if isinstance(name, str) and name.strip() else token.client_id,
            scope=token.scope,
            resource=token.resource,
            granted_at=first_seen[token.family_id],
            last_refreshed_at=token.created_at,
        )
    return sorted(families.values(), key=lambda grant: grant.last_refreshed_at, reverse=True)


async def revoke_grant(session: AsyncSession, user_id: str, family_id: str) -> None:
    """Revoke every token of the user's grant ``family_id``; NotFound if the user has no such live grant."""
    query = (
        update(OAuthToken)
        .where(OAuthToken.user_id == user_id, OAuthToken.family_id == family_id, OAuthToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    result = await session.execute(query, execution_options={"synchronize_session": False})
    if not getattr(result, "rowcount", 0):
        raise NotFound(f"no connected app {family_id[:40]!r}")
    note_revoked(session, user_id)


async def client_of(session: AsyncSession, user_id: str, family_id: str) -> tuple[str, str] | None:
    """The client (id, name) the user's grant ``family_id`` was issued to; None when there is no such grant."""
    query = (
        select(OAuthToken.client_id, OAuthClient.client_metadata)
        .outerjoin(OAuthClient, OAuthClient.id == OAuthToken.client_id)
        .where(OAuthToken.user_id == user_id, OAuthToken.family_id == family_id)
        .limit(1)
    )
    row = (await session.execute(query)).first()
    if row is None:
        return None
    name = (row[1] or {}).get("client_name")
    return str(row[0]), name if isinstance(name, str) and name.strip() else str(row[0])
