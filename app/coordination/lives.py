"""Where a session's coordination lives get their numbers: counters in the database, which outlive Redis.

A life begins whenever a session's coordination state starts empty. Its number orders its fencing tokens after every
earlier life's and tells a reader holding an older cursor that the feed it pointed into is gone.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import String, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from app.coordination.models import SessionKey
from app.db import Base, Database


class SessionLife(Base):
    """The number of the latest life of one tenant's session."""

    __tablename__ = "session_lives"

    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session: Mapped[str] = mapped_column(String(64), primary_key=True)
    life: Mapped[int] = mapped_column()


class Lives(Protocol):
    async def next_life(self, key: SessionKey) -> int:
        """A life number greater than every one handed out for ``key`` before, by any instance."""
        ...


class DatabaseLives:
    """Life numbers from the database: monotonic across instances and restarts of Redis or of the server."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def next_life(self, key: SessionKey) -> int:
        where = (SessionLife.user_id == key.user_id, SessionLife.session == key.session)
        for _ in range(3):
            async with self.db.session() as session:
                # The UPDATE locks the row, so concurrent callers each get a number of their own.
                bumped = await session.execute(update(SessionLife).where(*where).values(life=SessionLife.life + 1))
                if getattr(bumped, "rowcount", 0):
                    return int((await session.execute(select(SessionLife.life).where(*where))).scalar_one())
                try:
                    async with session.begin_nested():
                        await session.execute(
                            insert(SessionLife).values(user_id=key.user_id, session=key.session, life=1)
                        )
                except IntegrityError:
                    continue  # another instance inserted it first: bump theirs
                return 1
        raise RuntimeError(f"could not take a coordination life for {key}")


class CountingLives:
    """Life numbers counted in this process: for tests and tools that run coordination without a database."""

    def __init__(self) -> None:
        self._lives: dict[SessionKey, int] = {}

    async def next_life(self, key: SessionKey) -> int:
        self._lives[key] = self._lives.get(key, 0) + 1
        return self._lives[key]
