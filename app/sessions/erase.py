"""Deleting a whole session for its owner: its indexed documents with their chunks, its other memories, its
messages, tasks and agent registry. Memories go through the memory and document services (so each leaves its
history and a change for sync like any delete); the rest is the teams registry's."""

from __future__ import annotations

from dataclasses import dataclass

from app.accounts.principal import Principal
from app.container import Container
from app.identity import Identity
from app.memories import repository as memories
from app.projects import repository as documents
from app.teams import erase as teams

# Memories are deleted this many at a time; each batch is all or none.
BATCH = 500


@dataclass(frozen=True, slots=True)
class SessionContents:
    memories: int
    documents: int
    messages: int
    tasks: int

    def describe(self) -> str:
        def n(count: int, one: str, many: str) -> str:
            return f"{count} {one if count == 1 else many}"

        return (
            f"{n(self.memories, 'memory', 'memories')} (with {n(self.documents, 'indexed file', 'indexed files')}), "
            f"{n(self.messages, 'message', 'messages')} and {n(self.tasks, 'task', 'tasks')}"
        )


async def contents(container: Container, user_id: str, session: str) -> SessionContents:
    """What deleting the session would delete."""
    async with container.db.session() as db:
        written = (await memories.counts_by_session(db, user_id)).get(session, 0)
        files, _ = await documents.totals(db, user_id, session)
        messages, tasks = await teams.counts(db, user_id, session)
    return SessionContents(written, files, messages, tasks)


async def erase(container: Container, principal: Principal, session: str) -> SessionContents:
    """Delete everything of the session; returns what was there."""
    before = await contents(container, principal.user_id, session)
    identity = Identity(principal.user_id, session, None)
    async with container.db.session() as db:
        paths = [doc.path for doc in await documents.listing(db, principal.user_id, session)]
    if paths:
        await container.documents.remove(principal, identity, paths)
    while True:
        async with container.db.session() as db:
            ids = await memories.ids_in_session(db, principal.user_id, session, limit=BATCH)
        if not ids:
            break
        await container.memories.delete(principal, None, ids)
    async with container.db.session() as db:
        await teams.erase(db, principal.user_id, session)
    return before
