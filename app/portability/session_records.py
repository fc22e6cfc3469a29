"""Importing a session's records (documents, agents, messages, tasks): each skipped when already here, or
refused by line with the reason (see ``app.portability.importer``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database
from app.errors import AppError
from app.identity import validate_name
from app.memories.models import MemoryRecord
from app.portability.format import AgentLine, DocumentLine, MessageLine, TaskLine
from app.projects.models import Document
from app.teams.models import MessageRead, SessionAgent, SessionMessage, SessionTask, TaskDependency
from app.text import check_text

if TYPE_CHECKING:
    from app.portability.importer import Summary

# Ids per IN (...) when checking a document's chunks: well under SQLite's limit on bound parameters.
ID_BATCH = 500


async def import_documents(
    db: Database, user_id: str, items: Sequence[tuple[int, DocumentLine]], summary: Summary
) -> None:
    """Indexed files' rows (their chunks are memory lines), skipped when the session already has the path.

    Run after the memories: a document whose chunks are not all this account's memories now (refused above, say,
    because another account on this server holds those ids) is refused too. Its row would list the file as indexed,
    and sending the same file again would then change nothing, so it would never be found."""
    async with db.session() as session:
        held = await _pairs(session, select(Document.session, Document.path).where(Document.user_id == user_id))
        owned = await _owned_memories(session, user_id, {m.lower() for _, line in items for m in line.memory_ids})
        for number, line in items:
            key = (line.session, line.path)
            if key in held:
                summary.skipped += 1
                continue
            try:
                validate_name(line.session, "session")
                check_text(line.path, "path")
            except AppError as exc:
                summary.refuse(number, f"document {line.path}: {exc.message}")
                continue
            missing = [m for m in line.memory_ids if m.lower() not in owned]
            if missing:
                summary.refuse(
                    number,
                    f"document {line.path}: {len(missing)} of its {len(line.memory_ids)} chunks are not memories of "
                    "this account (refused above, or not in the file); send the file again to index it",
                )
                continue
            held.add(key)
            session.add(
                Document(
                    user_id=user_id,
                    session=line.session,
                    path=line.path,
                    origin=line.origin,
                    content_hash=line.content_hash,
                    size=line.size,
                    modified_at=line.modified_at,
                    memory_ids=[m.lower() for m in line.memory_ids],
                    chunks=line.chunks,
                    chunking=line.chunking,
                    indexed_at=line.indexed_at,
                )
            )
            summary.imported += 1


async def _pairs(session: AsyncSession, statement: Select[str, str]) -> set[tuple[str, str]]:
    """The rows of a two-column ``statement`` (what a session already holds, by name), as a set."""
    return {(first, second) for first, second in await session.execute(statement)}


async def _owned_memories(session: AsyncSession, user_id: str, ids: set[str]) -> set[str]:
    """Which of ``ids`` are live memories of ``user_id``."""
    wanted, owned = sorted(ids), set[str]()
    for start in range(0, len(wanted), ID_BATCH):
        owned.update(
            await session.scalars(
                select(MemoryRecord.id).where(
                    MemoryRecord.user_id == user_id,
                    MemoryRecord.deleted_at.is_(None),
                    MemoryRecord.id.in_(wanted[start : start + ID_BATCH]),
                )
            )
        )
    return owned


async def import_agents(db: Database, user_id: str, items: Sequence[tuple[int, AgentLine]], summary: Summary) -> None:
    """A session's agents, skipped when the session already has one of that name."""
    async with db.session() as session:
        held = await _pairs(
            session, select(SessionAgent.session, SessionAgent.agent).where(SessionAgent.user_id == user_id)
        )
        for number, line in items:
            key = (line.session, line.agent)
            if key in held:
                summary.skipped += 1
                continue
            try:
                validate_name(line.session, "session")
                validate_name(line.agent, "agent")
            except AppError as exc:
                summary.refuse(number, f"agent {line.agent}: {exc.message}")
                continue
            held.add(key)
            session.add(
                SessionAgent(
                    user_id=user_id,
                    session=line.session,
                    agent=line.agent,
                    role=line.role,
                    capabilities=list(line.capabilities),
                    client=line.client,
                    joined_at=line.joined_at,
                    left_at=line.left_at,
                    first_seen_at=line.first_seen_at,
                    last_seen_at=line.last_seen_at,
                )
            )
            summary.imported += 1


async def import_messages(
    db: Database, user_id: str, items: Sequence[tuple[int, MessageLine]], summary: Summary
) -> None:
    """Messages get this server's ids; ``reply_to`` follows them. A message already here (same session, sender,
    recipient, kind, content and time) is skipped and stands for its id."""
    async with db.session() as session:
        existing: dict[tuple[Any, ...], int] = {}
        rows = await session.execute(select(SessionMessage).where(SessionMessage.user_id == user_id))
        for m in rows.scalars():
            existing[_message_key(m.session, m.sender, m.recipient, m.kind, m.content, m.created_at)] = m.id
        ids: dict[int, int] = {}
        for number, line in sorted(items, key=lambda item: item[1].id):
            key = _message_key(line.session, line.sender, line.recipient, line.kind, line.content, line.created_at)
            if key in existing:
                ids[line.id] = existing[key]
                summary.skipped += 1
                continue
            try:
                validate_name(line.session, "session")
                validate_name(line.sender, "agent")
                check_text(line.content, "content")
            except AppError as exc:
                summary.refuse(number, f"message {line.id}: {exc.message}")
                continue
            message = SessionMessage(
                user_id=user_id,
                session=line.session,
                sender=line.sender,
                recipient=line.recipient,
                kind=line.kind,
                content=line.content,
                attachments=list(line.attachments),
                reply_to=ids.get(line.reply_to) if line.reply_to is not None else None,
                created_at=line.created_at,
            )
            session.add(message)
            await session.flush()
            ids[line.id] = message.id
            existing[key] = message.id
            for agent in dict.fromkeys(line.read_by):
                session.add(
                    MessageRead(
                        message_id=message.id,
                        agent=agent[:64],
                        user_id=user_id,
                        session=line.session,
                        read_at=line.created_at,
                    )
                )
            summary.imported += 1


async def import_tasks(db: Database, user_id: str, items: Sequence[tuple[int, TaskLine]], summary: Summary) -> None:
    """Tasks with their dependencies, skipped when the session already has the task id."""
    async with db.session() as session:
        held = await _pairs(
            session, select(SessionTask.session, SessionTask.task_id).where(SessionTask.user_id == user_id)
        )
        added: list[TaskLine] = []
        for number, line in items:
            key = (line.session, line.task_id)
            if key in held:
                summary.skipped += 1
                continue
            try:
                validate_name(line.session, "session")
                check_text(line.description, "description")
            except AppError as exc:
                summary.refuse(number, f"task {line.task_id}: {exc.message}")
                continue
            held.add(key)
            added.append(line)
            session.add(
                SessionTask(
                    user_id=user_id,
                    session=line.session,
                    task_id=line.task_id,
                    position=line.position,
                    description=line.description,
                    files=list(line.files),
                    status=line.status,
                    assignee=line.assignee,
                    result=line.result,
                    files_modified=list(line.files_modified),
                    created_by=line.created_by,
                    created_at=line.created_at,
                    claimed_at=line.claimed_at,
                    completed_at=line.completed_at,
                )
            )
            summary.imported += 1
        await session.flush()
        for line in added:
            for dep in dict.fromkeys(line.deps):
                session.add(TaskDependency(user_id=user_id, session=line.session, task_id=line.task_id, depends_on=dep))


def _message_key(*parts: Any) -> tuple[Any, ...]:
    return tuple(p.isoformat() if hasattr(p, "isoformat") else p for p in parts)
