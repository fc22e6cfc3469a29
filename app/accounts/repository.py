"""Every SQL query about users and API keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.accounts.models import ApiKey, User


async def get_user(session: AsyncSession, user_id: str) -> User | None:
    return await session.get(User, user_id)


async def get_user_by_email(session: AsyncSession, email: str) -> User | None:
    return (await session.execute(select(User).where(User.email == email))).scalar_one_or_none()


async def key_by_lookup(session: AsyncSession, lookup: str) -> ApiKey | None:
    return (await session.execute(select(ApiKey).where(ApiKey.lookup == lookup))).scalar_one_or_none()


async def keys_of(session: AsyncSession, user_id: str) -> Sequence[ApiKey]:
    query = select(ApiKey).where(ApiKey.user_id == user_id).order_by(ApiKey.created_at, ApiKey.id)
    return (await session.execute(query)).scalars().all()


async def key_of(session: AsyncSession, user_id: str | None, key_id: str) -> ApiKey | None:
    """A key by id; with a user id, only when it is that user's key."""
    query = select(ApiKey).where(ApiKey.id == key_id)
    if user_id is not None:
        query = query.where(ApiKey.user_id == user_id)
    return (await session.execute(query)).scalar_one_or_none()


async def touch_key(session: AsyncSession, key_id: str, when: datetime) -> None:
    await session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=when))
