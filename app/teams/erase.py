"""Counting and erasing what the teams registry holds of one session: messages, tasks and the agent registry."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.teams.models import MessageRead, SessionAgent, SessionMessage, SessionTask, TaskDependency


async def counts(db: AsyncSession, user_id: str, session: str) -> tuple[int, int]:
    """(messages, tasks) of one session."""
    messages = select(func.count()).where(SessionMessage.user_id == user_id, SessionMessage.session == session)
    tasks = select(func.count()).where(SessionTask.user_id == user_id, SessionTask.session == session)
    return int((await db.execute(messages)).scalar_one()), int((await db.execute(tasks)).scalar_one())


async def erase(db: AsyncSession, user_id: str, session: str) -> None:
    """Delete the session's messages (and who read them), tasks (and their dependencies) and agents."""
    for model in (MessageRead, SessionMessage, TaskDependency, SessionTask, SessionAgent):
        await db.execute(delete(model).where(model.user_id == user_id, model.session == session))
