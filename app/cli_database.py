"""The database an ``engram`` command works in, opened for one piece of work and closed after it: a key or client
revoked there reaches the running servers' open streams through Redis (when there is one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.accounts.revocations import Revocations
    from app.db import Database
    from app.settings import Settings


def run_with_db(settings: Settings, work: Callable[[Database], Awaitable[int]]) -> int:
    """Run ``work`` with the database open, in an event loop of its own; its result is the command's exit code."""
    import asyncio

    return asyncio.run(_with_db(settings, work))


async def _with_db(settings: Settings, work: Callable[[Database], Awaitable[int]]) -> int:
    async with command_database(settings) as (db, _):
        return await work(db)


@asynccontextmanager
async def command_database(settings: Settings) -> AsyncIterator[tuple[Database, Revocations]]:
    """The database, and the revocations that its commits announce (also to hand to what announces by itself)."""
    from app.accounts.revocations import Revocations
    from app.db import Database

    db = Database(settings.resolved_database_url)
    # A revocation made here reaches the running servers' open streams through Redis (when there is one).
    revocations = Revocations(settings.redis_url)
    db.after_commit.append(revocations.after_commit)
    try:
        yield db, revocations
    finally:
        await revocations.close()
        await db.dispose()
