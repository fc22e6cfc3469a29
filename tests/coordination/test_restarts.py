"""Coordination state lost under a reader's feet: a Redis restarted without persistence, a restarted in-process server.

Fencing tokens never go backwards (their high-water mark, the session's life, is in the database), a cursor from
before the restart is answered with an explicit reset, and live push resumes within about a second of Redis
answering again, the changes made meanwhile included.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from app.migrate import upgrade_to_head
from tests.conftest import _settings
from tests.harness import RunningServer, free_port, make_account, serve
from tests.mcp.conftest import connect, session_id
from tests.mcp.test_sessions import Inbox, call

pytestmark = [pytest.mark.redis]


class PrivateRedis:
    """A redis-server of this test's own, keeping nothing on disk (like the machine's), that it may restart."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                import redis

                redis.Redis(port=self.port, socket_timeout=0.5).ping()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def on_private_redis(
    private_redis: PrivateRedis, pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, PrivateRedis]]:
    settings = _settings(tmp_path_factory.mktemp("restart"), pg_database_url, redis_url=private_redis.url)
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server, private_redis


def _until_ok(send: Any, deadline: float = 60.0) -> httpx.Response:
    """Retry while coordination is unavailable (Redis just came back): bounded."""
    end = time.monotonic() + deadline
    while (response := send()).status_code == 503:
        assert time.monotonic() < end, response.text
        time.sleep(0.05)
    return response


def test_after_a_redis_restart_tokens_still_grow_and_an_old_cursor_hears_reset(
    on_private_redis: tuple[RunningServer, PrivateRedis],
) -> None:
    server, redis = on_private_redis
    me = make_account(server)
    claim = {"agent": "a", "file_paths": ["x.py"]}
    with server.client(me.key) as http:
        before = http.post("/v1/sessions/web/claims", json=claim).json()["claims"][0]["fencing_token"]
        again = http.post("/v1/sessions/web/claims", json=claim).json()["claims"][0]["fencing_token"]
        assert again == before + 1
        old = http.post("/v1/sessions/web/changes", json={"agent": "a", "changes_summary": "before"}).json()
        assert http.get("/v1/sessions/web/changes", params={"agent": "b", "since": old["cursor"]}).json() == {
            "changes": [],
            "cursor": old["cursor"],
            "reset": False,
        }

        redis.stop()
        redis.start()  # empty: no persistence

        after = _until_ok(lambda: http.post("/v1/sessions/web/claims", json={**claim, "agent": "b"}))
        token = after.json()["claims"][0]["fencing_token"]
        assert token > again, f"fencing went backwards after the restart: {token} after {again}"

        synced = _until_ok(lambda: http.get("/v1/sessions/web/changes", params={"agent": "b", "since": old["cursor"]}))
        assert synced.json()["reset"] is True and synced.json()["changes"] == []
        new = http.post("/v1/sessions/web/changes", json={"agent": "a", "changes_summary": "after"}).json()
        resumed = http.get("/v1/sessions/web/changes", params={"agent": "b", "since": old["cursor"]}).json()
        assert resumed["reset"] is True and [c["changes_summary"] for c in resumed["changes"]] == ["after"]
        assert resumed["cursor"] == new["cursor"]
        current = http.get("/v1/sessions/web/changes", params={"agent": "b", "since": new["cursor"]}).json()
        assert current == {"changes": [], "cursor": new["cursor"], "reset": False}


@pytest.mark.anyio
async def test_live_push_resumes_once_redis_returns_with_what_was_said_meanwhile(
    on_private_redis: tuple[RunningServer, PrivateRedis],
) -> None:
    server, redis = on_private_redis
    me = make_account(server)
    inbox = Inbox()
    async with (
        connect(server, me.key, session_id(me.user_id, "live", "a")) as a,
        connect(server, me.key, session_id(me.user_id, "live", "b"), logging_callback=inbox),
    ):
        with anyio.fail_after(60):
            while not inbox.events:
                await call(a, "session_broadcast_change", changes_summary="warm-up")
                with anyio.move_on_after(0.2):
                    await inbox.wait()

        await anyio.to_thread.run_sync(redis.stop)
        await anyio.sleep(0.5)  # b's subscription breaks and its pump starts retrying
        await anyio.to_thread.run_sync(redis.start)
        inbox.events.clear()
        # The first change after Redis returns: said possibly before b's pump has subscribed again.
        with anyio.fail_after(60):
            while True:  # bounded by the deadline: a tool error while the breaker has not yet closed
                if not (await a.call_tool("session_broadcast_change", {"changes_summary": "back"})).is_error:
                    break
                await anyio.sleep(0.05)
        kinds: list[tuple[str, Any]] = []
        # The pump retries every quarter second; only a pump that never resubscribes reaches this limit.
        with anyio.fail_after(30):
            while not any(kind == "change" for kind, _ in kinds):
                _, event = await inbox.next()
                kinds.append((event["kind"], event["data"].get("summary")))
    # Redis lost the feed: b is told so (reset) before the new feed's first change, which it does not miss.
    assert [k for k, _ in kinds if k != "change"] == ["reset"] and kinds[-1] == ("change", "back"), kinds


def test_a_restarted_in_process_server_keeps_tokens_growing_and_says_reset(
    embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("in-process-restart")
    url = f"sqlite+aiosqlite:///{tmp / 'engram.db'}"
    upgrade_to_head(url)
    settings = _settings(tmp, url)
    claim = {"agent": "a", "file_paths": ["x.py"]}
    with serve(settings, embedder=embedder) as first:  # type: ignore[arg-type]
        me = make_account(first)
        with first.client(me.key) as http:
            before = http.post("/v1/sessions/web/claims", json=claim).json()["claims"][0]["fencing_token"]
            old = http.post("/v1/sessions/web/changes", json={"agent": "a", "changes_summary": "x"}).json()["cursor"]
    settings.port = free_port()
    with serve(settings, embedder=embedder) as second, second.client(me.key) as http:  # type: ignore[arg-type]
        after = http.post("/v1/sessions/web/claims", json=claim).json()["claims"][0]["fencing_token"]
        synced = http.get("/v1/sessions/web/changes", params={"agent": "b", "since": old}).json()
    assert after > before
    assert synced["reset"] is True and synced["changes"] == []
