"""Counting, archiving and erasing what the teams registry holds of one session: messages, tasks, the agent registry
and whether its owner archived it."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.teams.models import MessageRead, SessionAgent, SessionArchive, SessionMessage, SessionTask, TaskDependency


async def counts(db: AsyncSession, user_id: str, session: str) -> tuple[int, int]:
    """(messages, tasks) of one session."""
    messages = select(func.count()).where(SessionMessage.user_id == user_id, SessionMessage.session == session)
    tasks = select(func.count()).where(SessionTask.user_id == user_id, SessionTask.session == session)
    return int((await db.execute(messages)).scalar_one()), int((await db.execute(tasks)).scalar_one())


async def erase(db: AsyncSession, user_id: str, session: str) -> None:
    """Delete the session's messages (and who read them), tasks (and their dependencies), agents and archive mark."""
    for model in (MessageRead, SessionMessage, TaskDependency, SessionTask, SessionAgent, SessionArchive):
        await db.execute(delete(model).where(model.user_id == user_id, model.session == session))


async def archived(db: AsyncSession, user_id: str) -> dict[str, SessionArchive]:
    """The user's archived sessions by name."""
    query = select(SessionArchive).where(SessionArchive.user_id == user_id)
    return {row.session: row for row in (await db.execute(query)).scalars()}


async def set_archived(db: AsyncSession, user_id: str, session: str, archived: bool) -> None:
    """Archive a session, or take it out of the archive; either is a no-op when already so."""
    await db.execute(delete(SessionArchive).where(SessionArchive.user_id == user_id, SessionArchive.session == session))
    if archived:
        db.add(SessionArchive(user_id=user_id, session=session, archived_at=utcnow()))
