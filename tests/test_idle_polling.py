"""An idle embedded server reads nothing from its database. Its pollers (the index follower, the revocation poll,
the sync links) first ask SQLite whether anything was committed since their last look (``PRAGMA data_version``) and
query only then, so a commit made by another process is still seen at the next turn."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from app.db import CommitCounter
from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import serve

TURN = 0.02  # each poller's interval here: 50 turns a second


class Statements:
    """The SQL a server's engine runs, as it runs it (on aiosqlite's threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[str] = []

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        with self._lock:
            self._seen.append(statement)

    def take(self) -> list[str]:
        with self._lock:
            seen, self._seen = self._seen, []
        return seen


@pytest.fixture
def idle_server(embedder: object, tmp_path: Path) -> Iterator[tuple[Statements, str]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(
        tmp_path, url, index_follow_seconds=TURN, revocation_poll_seconds=TURN, sync_links_poll_seconds=TURN
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        statements = Statements()
        engine = server.container.db.engine.sync_engine
        event.listen(engine, "before_cursor_execute", statements)
        try:
            yield statements, url
        finally:
            event.remove(engine, "before_cursor_execute", statements)


def _quiet(statements: Statements, seconds: float = 1.0) -> list[str]:
    """What ran in ``seconds`` with nothing committed (after a moment for any turn already under way)."""
    time.sleep(10 * TURN)
    statements.take()
    time.sleep(seconds)
    return statements.take()


def test_an_idle_server_queries_nothing_until_another_process_commits(
    idle_server: tuple[Statements, str], tmp_path: Path
) -> None:
    statements, url = idle_server
    # Each poller had about 50 turns; before the commit counter each one was a query (150 a second here).
    assert _quiet(statements) == []

    # Another process commits: the CLI creates an account.
    env = dict(os.environ, ENGRAM_DATA_DIR=str(tmp_path), ENGRAM_DATABASE_URL=url)
    created = subprocess.run(
        [sys.executable, "-m", "app.cli", "users", "create", "idle@example.com"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    deadline = time.monotonic() + 30  # a hang, not a speed: each poller looks within a turn
    seen: list[str] = []
    while time.monotonic() < deadline:
        seen += statements.take()
        if all(any(table in s for s in seen) for table in ("memory_changes", "credential_revocations", "sync_links")):
            break
        time.sleep(TURN)
    for table in ("memory_changes", "credential_revocations", "sync_links"):
        assert any(table in s for s in seen), f"no poller read {table} after the commit: {seen}"

    # And, having looked, they are quiet again.
    assert _quiet(statements) == []


def test_the_commit_counter_moves_with_each_commit_of_another_connection(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "counted.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x INTEGER)")
    counter = CommitCounter(f"sqlite+aiosqlite:///{path}")
    watch = counter.watch()
    try:
        assert watch.moved()  # a first look always looks
        watch.seen()
        assert not watch.moved()
        writer.execute("INSERT INTO t VALUES (1)")
        assert watch.moved()
        # Not seen (the look failed, say): it still says so at the next turn.
        assert watch.moved()
        watch.seen()
        assert not watch.moved()
    finally:
        counter.close()
        writer.close()
    # Where no counter exists, every look looks.
    assert CommitCounter("postgresql+asyncpg://nowhere/db").watch().moved()
    assert CommitCounter("sqlite+aiosqlite:///:memory:").watch().moved()
