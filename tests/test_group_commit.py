"""Group commit on SQLite: writes that arrive together commit together, and each one's failure is its own."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from app.accounts.models import User
from app.db import Database
from app.errors import Conflict
from app.group_commit import holds_write_lock
from app.migrate import upgrade_to_head
from app.observability.metrics import Metrics

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    return url


async def _users(db: Database) -> set[str]:
    async with db.session() as session:
        return set((await session.execute(select(User.id))).scalars())


async def test_writes_arriving_together_commit_in_one_group_and_a_failing_one_rolls_back_alone(
    sqlite_url: str,
) -> None:
    metrics = Metrics()
    db = Database(sqlite_url, probe=metrics)

    def writer(n: int):  # type: ignore[no-untyped-def]
        def work(session: Session) -> str:
            session.add(User(id=f"u_{n}", email=f"{n}@example.test"))
            session.flush()
            if n == 7:
                raise ValueError("seven refuses")
            return f"u_{n}"

        return work

    try:
        outcomes = await asyncio.gather(*(db.write(writer(n)) for n in range(20)), return_exceptions=True)
        assert isinstance(outcomes[7], ValueError)
        assert [o for i, o in enumerate(outcomes) if i != 7] == [f"u_{n}" for n in range(20) if n != 7]
        assert await _users(db) == {f"u_{n}" for n in range(20) if n != 7}
        histogram = metrics.stage_batch_size.labels("db_writer")
        assert histogram._sum.get() == 20 and sum(b.get() for b in histogram._buckets) == 1  # one commit for all
    finally:
        await db.dispose()


async def test_a_lone_write_commits_at_once_and_a_conflict_is_its_callers_alone(sqlite_url: str) -> None:
    db = Database(sqlite_url)

    def add(session: Session) -> None:
        session.add(User(id="u_dup", email="dup@example.test"))

    try:
        await db.write(add)
        assert await _users(db) == {"u_dup"}
        # The same key again fails on the database's constraint: that caller hears it, nothing else changes.
        results = await asyncio.gather(db.write(add), return_exceptions=True)
        assert isinstance(results[0], Exception)
        async with db.session() as session:
            assert (await session.execute(select(func.count()).select_from(User))).scalar_one() == 1
    finally:
        await db.dispose()


async def test_a_lone_write_that_fails_leaves_none_of_its_rows(sqlite_url: str) -> None:
    """A write that fails after its statements ran (a refusal found late, as a quota's) undoes all it wrote."""
    db = Database(sqlite_url)

    def half_done(session: Session) -> None:
        session.add(User(id="u_half", email="half@example.test"))
        session.flush()
        raise ValueError("refused after writing")

    def whole(session: Session) -> None:
        session.add(User(id="u_whole", email="whole@example.test"))

    try:
        with pytest.raises(ValueError, match="refused after writing"):
            await db.write(half_done)
        assert await _users(db) == set()
        # Alone in its group it had no savepoint: its whole transaction was rolled back, and the next one is clean.
        await db.write(whole)
        assert await _users(db) == {"u_whole"}
    finally:
        await db.dispose()


async def test_a_groups_work_holds_the_write_lock_and_no_other_session_claims_to(sqlite_url: str) -> None:
    """What lets the quota skip touching the user's row on SQLite: only a group's transaction says it holds the
    database's write lock, and the after-commit hooks never see the marker."""
    db = Database(sqlite_url)
    seen: list[dict[str, object]] = []

    async def hook(info: dict[str, object]) -> None:
        seen.append(info)

    db.after_commit.append(hook)

    def writer(n: int):  # type: ignore[no-untyped-def]
        def work(session: Session) -> bool:
            session.add(User(id=f"u_lock{n}", email=f"lock{n}@example.test"))
            return holds_write_lock(session)

        return work

    try:
        assert await db.write(writer(0)) is True  # alone in its group
        assert await asyncio.gather(*(db.write(writer(n)) for n in (1, 2, 3))) == [True, True, True]  # together
        assert await _users(db) == {"u_lock0", "u_lock1", "u_lock2", "u_lock3"}
        async with db.session() as session:
            assert holds_write_lock(session) is False
        assert seen and all(not any(key.startswith("engram.") for key in info) for info in seen)
    finally:
        await db.dispose()


async def test_a_lone_write_that_loses_a_version_race_hears_conflict(sqlite_url: str) -> None:
    db = Database(sqlite_url)

    def stale(session: Session) -> None:
        session.add(User(id="u_stale", email="stale@example.test"))
        raise StaleDataError("the row changed underneath")

    try:
        with pytest.raises(Conflict, match="changed by another request"):
            await db.write(stale)
        assert await _users(db) == set()
    finally:
        await db.dispose()


async def test_a_groups_transaction_runs_off_the_event_loop(sqlite_url: str) -> None:
    """The works run on a worker thread: a slow one (a big flush, a disk that stalls a commit) never stops the other
    requests' turns on the loop. Here the work waits for a callback it asked the loop to run, which only a loop that
    keeps turning can do."""
    db = Database(sqlite_url)
    loop = asyncio.get_running_loop()
    released = threading.Event()

    def waits_for_the_loop(session: Session) -> bool:
        session.add(User(id="u_slow", email="slow@example.test"))
        loop.call_soon_threadsafe(released.set)
        # Only a guard against a hang: on the loop, the callback that sets it could not run, and this gives up.
        return released.wait(timeout=30)

    try:
        assert await db.write(waits_for_the_loop) is True
        assert await _users(db) == {"u_slow"}
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_on_postgres_a_write_is_a_transaction_of_its_own(pg_database_url: str) -> None:
    db = Database(pg_database_url)
    tag = uuid.uuid4().hex[:8]

    def add(session: Session) -> str:
        session.add(User(id=f"u_pg{tag}", email=f"pg{tag}@example.test"))
        session.flush()
        return f"u_pg{tag}"

    def refused(session: Session) -> None:
        session.add(User(id=f"u_no{tag}", email=f"no{tag}@example.test"))
        session.flush()
        raise ValueError("refused after writing")

    try:
        assert await db.write(add) == f"u_pg{tag}"
        with pytest.raises(ValueError, match="refused after writing"):
            await db.write(refused)
        users = await _users(db)
        assert f"u_pg{tag}" in users and f"u_no{tag}" not in users
    finally:
        await db.dispose()
