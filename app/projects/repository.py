"""Every SQL query about projects and indexed documents. Each takes the tenant (user id) first."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.projects.models import Document, Project


async def documents(
    session: AsyncSession, user_id: str, session_name: str, paths: Sequence[str] | None = None
) -> dict[str, Document]:
    """The session's indexed documents by path (all of them, or those of ``paths``)."""
    query = select(Document).where(Document.user_id == user_id, Document.session == session_name)
    if paths is not None:
        if not paths:
            return {}
        query = query.where(Document.path.in_(list(paths)))
    return {doc.path: doc for doc in (await session.execute(query)).scalars()}


async def listing(session: AsyncSession, user_id: str, session_name: str) -> Sequence[Document]:
    query = (
        select(Document).where(Document.user_id == user_id, Document.session == session_name).order_by(Document.path)
    )
    return (await session.execute(query)).scalars().all()


async def lock_session(session: AsyncSession, user_id: str, session_name: str) -> None:
    """Serialise document writes of one session across processes until the transaction ends (PostgreSQL).

    SQLite has one writer at a time and a single server process; there the service's in-process lock suffices."""
    if session.get_bind().dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"engram-documents\x00{user_id}\x00{session_name}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


async def save_document(
    session: AsyncSession,
    existing: Document | None,
    *,
    user_id: str,
    session_name: str,
    path: str,
    origin: str,
    content_hash: str,
    size: int,
    modified_at: datetime | None,
    memory_ids: list[str],
    chunking: int,
) -> None:
    now = utcnow()
    if existing is None:
        existing = Document(user_id=user_id, session=session_name, path=path)
        session.add(existing)
    existing.origin = origin
    existing.content_hash = content_hash
    existing.size = size
    existing.modified_at = modified_at
    existing.memory_ids = list(memory_ids)
    existing.chunks = len(memory_ids)
    existing.chunking = chunking
    existing.indexed_at = now


async def drop_documents(session: AsyncSession, user_id: str, session_name: str, paths: Sequence[str]) -> None:
    if paths:
        await session.execute(
            delete(Document).where(
                Document.user_id == user_id, Document.session == session_name, Document.path.in_(list(paths))
            )
        )


async def totals(session: AsyncSession, user_id: str, session_name: str) -> tuple[int, int]:
    """(files, chunks) indexed in a session."""
    query = select(func.count(), func.coalesce(func.sum(Document.chunks), 0)).where(
        Document.user_id == user_id, Document.session == session_name
    )
    row = (await session.execute(query)).one()
    return int(row[0]), int(row[1])


# --- projects -----------------------------------------------------------------------------------------------------


async def project(session: AsyncSession, user_id: str, name: str) -> Project | None:
    query = select(Project).where(Project.user_id == user_id, Project.name == name)
    return (await session.execute(query)).scalar_one_or_none()


async def projects_named(session: AsyncSession, name: str) -> Sequence[Project]:
    """Every user's project of this name: for the local command line, which names a project without a user."""
    return (await session.execute(select(Project).where(Project.name == name))).scalars().all()


async def all_projects(session: AsyncSession) -> Sequence[Project]:
    """Every registered project of every user on this server (the watcher, ``engram projects list``)."""
    query = select(Project).order_by(Project.user_id, Project.name)
    return (await session.execute(query)).scalars().all()


async def touch_project(session: AsyncSession, user_id: str, name: str, when: datetime) -> None:
    found = await project(session, user_id, name)
    if found is not None:
        found.last_indexed_at = when


async def totals_by_session(session: AsyncSession, user_id: str) -> dict[str, tuple[int, int]]:
    """(files, chunks) indexed in each of the user's sessions that has any."""
    query = (
        select(Document.session, func.count(), func.coalesce(func.sum(Document.chunks), 0))
        .where(Document.user_id == user_id)
        .group_by(Document.session)
    )
    return {name: (int(files), int(chunks)) for name, files, chunks in (await session.execute(query)).all()}
