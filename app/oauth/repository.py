"""Every SQL query about OAuth clients, codes and tokens.

The authorization server (authlib) is synchronous, so it runs inside ``AsyncSession.run_sync`` and uses the
``Session`` functions here; token checks on every API request use the async Core queries at the bottom.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import ColumnElement, CursorResult, bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session

from app.accounts.models import ApiKey
from app.accounts.revocations import note_revoked
from app.db import Database
from app.oauth.models import OAuthClient, OAuthCode, OAuthDeviceCode, OAuthToken


def get_client(session: Session, client_id: str) -> OAuthClient | None:
    """A client that may still be used; a revoked one is as unknown as a missing one."""
    row = session.get(OAuthClient, client_id)
    return None if row is None or row.revoked_at is not None else row


def add(session: Session, row: OAuthClient | OAuthCode | OAuthDeviceCode | OAuthToken) -> None:
    session.add(row)
    session.flush()


def code_by_hash(session: Session, code_hash: str, client_id: str) -> OAuthCode | None:
    query = select(OAuthCode).where(OAuthCode.id == code_hash, OAuthCode.client_id == client_id)
    return session.execute(query).scalar_one_or_none()


def consume_code(session: Session, code_hash: str, when: datetime) -> bool:
    """Mark the code used; False when another request already did (the UPDATE is the arbiter under concurrency)."""
    query = update(OAuthCode).where(OAuthCode.id == code_hash, OAuthCode.used_at.is_(None)).values(used_at=when)
    result: CursorResult[tuple[()]] = session.execute(query)  # type: ignore[assignment]
    return result.rowcount == 1


def device_by_hash(session: Session, device_code_hash: str) -> OAuthDeviceCode | None:
    return session.get(OAuthDeviceCode, device_code_hash)


def user_code_taken(session: Session, user_code_hash: str) -> bool:
    query = select(OAuthDeviceCode.id).where(OAuthDeviceCode.user_code == user_code_hash)
    return session.execute(query).first() is not None


def consume_device_code(session: Session, device_code_hash: str, when: datetime) -> bool:
    """Mark the device code exchanged; False when another request already did."""
    query = (
        update(OAuthDeviceCode)
        .where(OAuthDeviceCode.id == device_code_hash, OAuthDeviceCode.used_at.is_(None))
        .values(used_at=when)
    )
    result: CursorResult[tuple[()]] = session.execute(query)  # type: ignore[assignment]
    return result.rowcount == 1


async def pending_device(
    session: AsyncSession, user_code_hash: str, now: datetime
) -> tuple[OAuthDeviceCode, OAuthClient | None] | None:
    """The undecided, unexpired device request with this user code, and its registered client (if stored)."""
    query = (
        select(OAuthDeviceCode, OAuthClient)
        .outerjoin(OAuthClient, OAuthClient.id == OAuthDeviceCode.client_id)
        .where(
            OAuthDeviceCode.user_code == user_code_hash,
            OAuthDeviceCode.decision.is_(None),
            OAuthDeviceCode.expires_at > now,
        )
    )
    row = (await session.execute(query)).first()
    return None if row is None else (row[0], row[1])


async def decide_device(session: AsyncSession, user_code_hash: str, user_id: str, decision: str, now: datetime) -> bool:
    """Record ``user_id``'s decision on a pending device request; False when it was decided or expired meanwhile."""
    query = (
        update(OAuthDeviceCode)
        .where(
            OAuthDeviceCode.user_code == user_code_hash,
            OAuthDeviceCode.decision.is_(None),
            OAuthDeviceCode.expires_at > now,
        )
        .values(user_id=user_id, decision=decision, decided_at=now)
    )
    result = await session.execute(query, execution_options={"synchronize_session": False})
    return bool(getattr(result, "rowcount", 0))


def token_by_refresh_hash(session: Session, refresh_hash: str) -> OAuthToken | None:
    return session.execute(select(OAuthToken).where(OAuthToken.refresh_hash == refresh_hash)).scalar_one_or_none()


def token_by_access_hash(session: Session, access_hash: str) -> OAuthToken | None:
    return session.execute(select(OAuthToken).where(OAuthToken.access_hash == access_hash)).scalar_one_or_none()


def rotate_refresh(session: Session, token_id: str, when: datetime) -> bool:
    """Mark the refresh token exchanged; False when it already was (reuse, or a concurrent refresh)."""
    query = (
        update(OAuthToken)
        .where(OAuthToken.id == token_id, OAuthToken.refresh_used_at.is_(None), OAuthToken.revoked_at.is_(None))
        .values(refresh_used_at=when)
    )
    result: CursorResult[tuple[()]] = session.execute(query)  # type: ignore[assignment]
    return result.rowcount == 1


def revoke_family(session: Session, family_id: str, when: datetime) -> None:
    _note_owners(session, OAuthToken.family_id == family_id)
    query = (
        update(OAuthToken)
        .where(OAuthToken.family_id == family_id, OAuthToken.revoked_at.is_(None))
        .values(revoked_at=when)
    )
    session.execute(query, execution_options={"synchronize_session": False})


def revoke_token(session: Session, token_id: str, when: datetime) -> None:
    _note_owners(session, OAuthToken.id == token_id)
    query = update(OAuthToken).where(OAuthToken.id == token_id, OAuthToken.revoked_at.is_(None)).values(revoked_at=when)
    session.execute(query, execution_options={"synchronize_session": False})


def _note_owners(session: Session, which: ColumnElement[bool]) -> None:
    """Open streams of the tokens' user re-check their credential once this transaction commits."""
    for user_id in session.execute(select(OAuthToken.user_id).where(which).distinct()).scalars():
        note_revoked(session, user_id)


_tokens = OAuthToken.__table__.c
_clients = OAuthClient.__table__.c
_keys = ApiKey.__table__.c
_TOKEN_BY_ACCESS = (
    select(
        _tokens.id,
        _tokens.family_id,
        _tokens.user_id,
        _tokens.scope,
        _tokens.resource,
        _tokens.access_expires_at,
        _tokens.revoked_at,
        _clients.revoked_at,
        _clients.registered_with_key,
        _keys.id,
        _keys.revoked_at,
    )
    .select_from(
        OAuthToken.__table__.outerjoin(OAuthClient.__table__, _clients.id == _tokens.client_id).outerjoin(
            ApiKey.__table__, _keys.id == _clients.registered_with_key
        )
    )
    .where(_tokens.access_hash == bindparam("access_hash"))
)


class AccessRow(NamedTuple):
    id: str
    family_id: str
    user_id: str
    scope: str
    resource: str
    access_expires_at: datetime
    revoked_at: datetime | None
    client_revoked_at: datetime | None
    registered_with_key: str | None
    key_id: str | None
    key_revoked_at: datetime | None

    @property
    def registering_key_revoked(self) -> bool:
        return _key_gone(self.registered_with_key, self.key_id, self.key_revoked_at)


def _key_gone(registered_with: str | None, key_id: str | None, key_revoked_at: datetime | None) -> bool:
    """A machine client's tokens live only as long as the API key that registered the client."""
    return registered_with is not None and (key_id is None or key_revoked_at is not None)


def registering_key_revoked(session: Session, client_id: str) -> bool:
    """Whether ``client_id`` was registered with an API key that has since been revoked (or deleted)."""
    query = (
        select(_clients.registered_with_key, _keys.id, _keys.revoked_at)
        .select_from(OAuthClient.__table__.outerjoin(ApiKey.__table__, _keys.id == _clients.registered_with_key))
        .where(_clients.id == client_id)
    )
    row = session.execute(query).first()
    return row is not None and _key_gone(*row)


_FAMILY_ACTIVE = (
    select(_tokens.id)
    .where(
        _tokens.family_id == bindparam("family_id"),
        _tokens.revoked_at.is_(None),
        _tokens.access_expires_at > bindparam("now"),
    )
    .limit(1)
)


async def family_is_active(db: Database, family_id: str, now: datetime) -> bool:
    """Whether the grant still has a live access token (for streams that outlive the request that opened them)."""
    return await db.first(_FAMILY_ACTIVE, {"family_id": family_id, "now": now}) is not None


async def access_row(db: Database, access_hash: str) -> AccessRow | None:
    """What checking an access token needs, by a Core query: this runs on every request."""
    row = await db.first(_TOKEN_BY_ACCESS, {"access_hash": access_hash})
    return None if row is None else AccessRow._make(row)


async def purge_expired(conn: AsyncConnection, before: datetime) -> int:
    """Delete codes (authorization and device) that expired before ``before``, and tokens whose access and refresh
    tokens both did.

    A used refresh token that has not expired stays: presenting it again must still be caught as reuse."""
    codes = await conn.execute(delete(OAuthCode).where(OAuthCode.expires_at < before))
    devices = await conn.execute(delete(OAuthDeviceCode).where(OAuthDeviceCode.expires_at < before))
    tokens = await conn.execute(
        delete(OAuthToken).where(
            OAuthToken.access_expires_at < before,
            or_(OAuthToken.refresh_expires_at.is_(None), OAuthToken.refresh_expires_at < before),
        )
    )
    return int(codes.rowcount or 0) + int(devices.rowcount or 0) + int(tokens.rowcount or 0)
