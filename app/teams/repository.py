"""Every SQL query about a team's agents and messages (tasks: task_repository). Each takes the tenant (user id)
first, and the session where there is one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import exists, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.teams.models import MessageRead, SessionAgent, SessionMessage


def _insert(db: AsyncSession, table: Any) -> Any:
    """INSERT with the dialect's ON CONFLICT support (PostgreSQL and SQLite spell it the same way)."""
    dialect = db.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


# --- agents ------------------------------------------------------------------------------------------------------


async def mark_seen(
    db: AsyncSession, user_id: str, session: str, agent: str, now: datetime, *, revive: bool = True
) -> None:
    """Record that ``agent`` used ``session`` now (creating its row the first time); unless ``revive``, an agent that
    left stays as it is."""
    statement = _insert(db, SessionAgent).values(
        user_id=user_id, session=session, agent=agent, capabilities=[], first_seen_at=now, last_seen_at=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=["user_id", "session", "agent"],
        set_={"last_seen_at": now},
        # Gone: it left and has not called a tool since.
        where=None if revive else or_(SessionAgent.left_at.is_(None), SessionAgent.last_seen_at > SessionAgent.left_at),
    )
    await db.execute(statement)


async def join(
    db: AsyncSession,
    user_id: str,
    session: str,
    agent: str,
    *,
    role: str,
    capabilities: list[str],
    client: str | None,
    now: datetime,
) -> SessionAgent:
    """Put ``agent`` in the registry (again), with what it says it is."""
    fields = {"role": role, "capabilities": capabilities, "client": client, "joined_at": now, "left_at": None}
    statement = _insert(db, SessionAgent).values(
        user_id=user_id, session=session, agent=agent, first_seen_at=now, last_seen_at=now, **fields
    )
    statement = statement.on_conflict_do_update(
        index_elements=["user_id", "session", "agent"], set_={**fields, "last_seen_at": now}
    )
    await db.execute(statement)
    row = await get_agent(db, user_id, session, agent)
    assert row is not None
    return row


async def leave(db: AsyncSession, user_id: str, session: str, agent: str, now: datetime) -> bool:
    """Take ``agent`` out of the registry; False when it was not in it."""
    statement = (
        update(SessionAgent)
        .where(
            SessionAgent.user_id == user_id,
            SessionAgent.session == session,
            SessionAgent.agent == agent,
            SessionAgent.joined_at.is_not(None),
        )
        .values(joined_at=None, left_at=now)
    )
    result = await db.execute(statement)
    return bool(getattr(result, "rowcount", 0))


async def get_agent(db: AsyncSession, user_id: str, session: str, agent: str) -> SessionAgent | None:
    query = select(SessionAgent).where(
        SessionAgent.user_id == user_id, SessionAgent.session == session, SessionAgent.agent == agent
    )
    return (await db.execute(query.execution_options(populate_existing=True))).scalar_one_or_none()


def role_query(user_id: str, session: str, agent: str) -> Any:
    """The role ``agent`` joined ``session`` with, if it is in the registry (a point read by primary key)."""
    return select(SessionAgent.role).where(
        SessionAgent.user_id == user_id,
        SessionAgent.session == session,
        SessionAgent.agent == agent,
        SessionAgent.joined_at.is_not(None),
    )


async def agents_of(db: AsyncSession, user_id: str, session: str) -> Sequence[SessionAgent]:
    query = select(SessionAgent).where(SessionAgent.user_id == user_id, SessionAgent.session == session)
    return (await db.execute(query)).scalars().all()


async def recent_agents(db: AsyncSession, user_id: str, *, limit: int) -> Sequence[SessionAgent]:
    """The tenant's agent rows across sessions, most recently seen first (the dashboard's list of sessions)."""
    query = (
        select(SessionAgent)
        .where(SessionAgent.user_id == user_id)
        .order_by(SessionAgent.last_seen_at.desc())
        .limit(limit)
    )
    return (await db.execute(query)).scalars().all()


# --- messages ----------------------------------------------------------------------------------------------------


async def add_message(db: AsyncSession, message: SessionMessage) -> SessionMessage:
    db.add(message)
    await db.flush()
    return message


async def message_exists(db: AsyncSession, user_id: str, session: str, message_id: int) -> bool:
    query = select(SessionMessage.id).where(
        SessionMessage.user_id == user_id, SessionMessage.session == session, SessionMessage.id == message_id
    )
    return (await db.execute(query)).first() is not None


def _read_by(agent: str) -> Any:
    return exists().where(MessageRead.message_id == SessionMessage.id, MessageRead.agent == agent)


async def inbox(
    db: AsyncSession, user_id: str, session: str, agent: str, role: str | None, *, unread_only: bool, limit: int
) -> list[tuple[SessionMessage, bool]]:
    """Messages to ``agent``, its role or everyone, from others, oldest first, each with whether it was read."""
    targets = [agent, "*"] + ([f"role:{role}"] if role else [])
    read = _read_by(agent)
    query = select(SessionMessage, read.label("read")).where(
        SessionMessage.user_id == user_id,
        SessionMessage.session == session,
        SessionMessage.recipient.in_(targets),
        SessionMessage.sender != agent,
    )
    if unread_only:
        query = query.where(~read)
    query = query.order_by(SessionMessage.id).limit(limit)
    return [(row[0], bool(row[1])) for row in (await db.execute(query)).all()]


async def mark_read(
    db: AsyncSession, user_id: str, session: str, agent: str, message_ids: Sequence[int], now: datetime
) -> set[int]:
    """Mark messages read by ``agent``; returns the ids this call marked (not those already read), so that two
    concurrent inbox calls of one agent never both deliver a message as unread."""
    if not message_ids:
        return set()
    rows = [
        {"message_id": mid, "agent": agent, "user_id": user_id, "session": session, "read_at": now}
        for mid in message_ids
    ]
    statement = _insert(db, MessageRead).values(rows).on_conflict_do_nothing().returning(MessageRead.message_id)
    return set((await db.execute(statement)).scalars())


async def messages_of(
    db: AsyncSession,
    user_id: str,
    session: str,
    *,
    after: int | None,
    limit: int,
    seen_by: tuple[str, str | None] | None = None,
) -> Sequence[SessionMessage]:
    """Every message of the session after id ``after``, oldest first (the session's log); with ``seen_by`` (an agent
    and its role), only those it sent or that were sent to it, its role or everyone."""
    query = select(SessionMessage).where(SessionMessage.user_id == user_id, SessionMessage.session == session)
    if seen_by is not None:
        agent, role = seen_by
        targets = [agent, "*"] + ([f"role:{role}"] if role else [])
        query = query.where(or_(SessionMessage.sender == agent, SessionMessage.recipient.in_(targets)))
    if after is not None:
        query = query.where(SessionMessage.id > after)
    return (await db.execute(query.order_by(SessionMessage.id).limit(limit))).scalars().all()


async def latest_messages(db: AsyncSession, user_id: str, session: str, *, limit: int) -> Sequence[SessionMessage]:
    """The newest messages of the session, newest first."""
    query = (
        select(SessionMessage)
        .where(SessionMessage.user_id == user_id, SessionMessage.session == session)
        .order_by(SessionMessage.id.desc())
        .limit(limit)
    )
    return (await db.execute(query)).scalars().all()
