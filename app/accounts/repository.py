"""Every SQL query about users and API keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Update, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.models import ApiKey, User
from app.db import Database


async def get_user(session: AsyncSession, user_id: str) -> User | None:
    return await session.get(User, user_id)


async def all_users(session: AsyncSession) -> Sequence[User]:
    """Every user, oldest first (the operator's ``engram users list``)."""
    return (await session.execute(select(User).order_by(User.created_at, User.id))).scalars().all()


async def get_user_by_email(session: AsyncSession, email: str) -> User | None:
    return (await session.execute(select(User).where(User.email == email))).scalar_one_or_none()


async def key_by_lookup(session: AsyncSession, lookup: str) -> ApiKey | None:
    return (await session.execute(select(ApiKey).where(ApiKey.lookup == lookup))).scalar_one_or_none()


_keys = ApiKey.__table__.c
_KEY_BY_LOOKUP = select(
    _keys.id,
    _keys.user_id,
    _keys.scope,
    _keys.key_hash,
    _keys.revoked_at,
    _keys.last_used_at,
    _keys.session,
    _keys.agent,
).where(_keys.lookup == bindparam("lookup"))


class KeyRow(NamedTuple):
    id: str
    user_id: str
    scope: str
    key_hash: str
    revoked_at: datetime | None
    last_used_at: datetime | None
    session: str | None
    agent: str | None


async def key_row_by_lookup(db: Database, lookup: str) -> KeyRow | None:
    """The columns authentication needs, by a Core query: this runs on every request, so no ORM unit of work."""
    row = await db.first(_KEY_BY_LOOKUP, {"lookup": lookup})
    return None if row is None else KeyRow._make(row)


_KEY_ACTIVE = select(ApiKey.id).where(ApiKey.id == bindparam("key_id"), ApiKey.revoked_at.is_(None))


async def key_is_active(db: Database, key_id: str) -> bool:
    """Whether the key exists and is not revoked (for streams that outlive the request that opened them)."""
    return await db.first(_KEY_ACTIVE, {"key_id": key_id}) is not None


async def keys_of(session: AsyncSession, user_id: str) -> Sequence[ApiKey]:
    query = select(ApiKey).where(ApiKey.user_id == user_id).order_by(ApiKey.created_at, ApiKey.id)
    return (await session.execute(query)).scalars().all()


async def key_of(session: AsyncSession, user_id: str | None, key_id: str) -> ApiKey | None:
    """A key by id; with a user id, only when it is that user's key."""
    query = select(ApiKey).where(ApiKey.id == key_id)
    if user_id is not None:
        query = query.where(ApiKey.user_id == user_id)
    return (await session.execute(query)).scalar_one_or_none()


def touch_key_statement(key_id: str, when: datetime) -> Update:
    return update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=when)
