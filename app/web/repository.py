"""Every SQL query about web sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.accounts.models import User
from app.web.models import WebSession


async def session_with_user(session: AsyncSession, session_id: str, now: datetime) -> tuple[WebSession, User] | None:
    """A live web session and its user."""
    query = (
        select(WebSession, User)
        .join(User, User.id == WebSession.user_id)
        .where(WebSession.id == session_id, WebSession.expires_at > now)
    )
    row = (await session.execute(query)).one_or_none()
    return (row[0], row[1]) if row is not None else None


async def delete_session(session: AsyncSession, session_id: str) -> None:
    await session.execute(delete(WebSession).where(WebSession.id == session_id))


async def delete_expired(session: AsyncSession, user_id: str, now: datetime) -> None:
    await session.execute(delete(WebSession).where(WebSession.user_id == user_id, WebSession.expires_at <= now))


async def purge_expired(conn: AsyncConnection, before: datetime) -> int:
    """Delete every user's sessions that expired before ``before``."""
    result = await conn.execute(delete(WebSession).where(WebSession.expires_at < before))
    return int(result.rowcount or 0)
